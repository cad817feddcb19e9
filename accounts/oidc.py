"""Single sign-on with OpenID Connect: the provider's endpoints, read from its discovery
document, and the backend that turns its answer into a portal user.

mozilla-django-oidc speaks the protocol: the authorization code flow with PKCE and a nonce, the
token request, the ID token's signature checked with the provider's published keys (JWKS,
fetched at each sign-in, so that a rotated key is picked up), the userinfo request. What this
module adds to it:

- the endpoints from discovery (the library wants them as settings), read at the first sign-in
  and kept an hour, not at start-up, so that the portal starts, migrates and serves local
  accounts while the provider is down; a provider that does not answer is named on the login
  page (:class:`ProviderUnavailable`);
- the ID token's issuer and audience checked (the library leaves the audience unchecked), and
  the userinfo answer held to the ID token's subject;
- the claims mapped: the username (refused on the login page when missing or not a valid
  portal username, :class:`SignInRefused`), the e-mail, and the groups, applied at every
  sign-in through :func:`accounts.directory.apply_directory_groups`.

Users are matched by username only (never by e-mail). An account of another kind of the same
name is not taken over: an LDAP one, nor a local one with a password (the first admin); a local
one without a password (made for single sign-on in the admin, "password-based authentication:
disabled") is."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

import jwt
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import SuspiciousOperation, ValidationError
from django.db import transaction
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from accounts.directory import apply_directory_groups, source_of
from accounts.ldap_backend import CheckedSessions
from accounts.models import Account

logger = logging.getLogger(__name__)

DISCOVERY_PATH = "/.well-known/openid-configuration"
DISCOVERY_SECONDS = 3600.0
# The attribute of the request the backend leaves its refusal in, for the callback view.
REFUSAL = "oidc_refusal"
# The ID token's own claims, not the user's: left out of the claims mapped.
PROTOCOL_CLAIMS = frozenset(
    {"iss", "aud", "exp", "iat", "nbf", "nonce", "auth_time", "at_hash", "c_hash", "azp", "sid"}
    | {"acr", "amr", "jti"}
)
USERNAME_MAX = 150


class ProviderUnavailable(Exception):
    """The provider's discovery document could not be read, or is not its issuer's."""


class SignInRefused(Exception):
    """A sign-in the portal refuses; the text says why on the login page."""


@dataclass(frozen=True)
class ProviderMetadata:
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    userinfo_endpoint: str  # "": none, the ID token's claims alone
    end_session_endpoint: str  # "": none, sign-out ends only the portal's session


_lock = threading.Lock()
_cache: dict[str, tuple[float, ProviderMetadata]] = {}


def provider_name() -> str:
    return str(settings.OIDC_PROVIDER_NAME)


def provider_metadata() -> ProviderMetadata:
    """``OIDC_ISSUER``'s discovery document, read once an hour per process. A provider that
    does not answer when it is due again is not held against sign-ins: the last one read is
    kept until it answers."""
    issuer: str = settings.OIDC_ISSUER
    now = time.monotonic()
    with _lock:
        cached = _cache.get(issuer)
    if cached is not None and now - cached[0] < DISCOVERY_SECONDS:
        return cached[1]
    try:
        metadata = discover(issuer)
    except ProviderUnavailable as exc:
        if cached is None:
            raise
        logger.warning("single sign-on: %s; the endpoints read before are kept", exc)
        return cached[1]
    with _lock:
        _cache[issuer] = (now, metadata)
    return metadata


def discover(issuer: str) -> ProviderMetadata:
    url = issuer + DISCOVERY_PATH
    try:
        response = requests.get(url, timeout=settings.OIDC_TIMEOUT)
        response.raise_for_status()
        document = response.json()
    except requests.Timeout as exc:
        raise unavailable(url, f"no answer in {settings.OIDC_TIMEOUT:g} s", exc) from exc
    except requests.HTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        raise unavailable(url, f"HTTP {status}", exc) from exc
    except requests.RequestException as exc:
        raise unavailable(url, "could not connect", exc) from exc
    except ValueError as exc:
        raise unavailable(url, "its answer is not JSON", exc) from exc
    if not isinstance(document, dict):
        raise unavailable(url, "its answer is not a JSON object", None)
    said = document.get("issuer")
    if not isinstance(said, str) or said.rstrip("/") != issuer:
        raise unavailable(url, f"it names another issuer, {said!r}", None)

    def endpoint(name: str, required: bool = True) -> str:
        value = document.get(name)
        if isinstance(value, str) and value.startswith(("https://", "http://")):
            return value
        if required:
            raise unavailable(url, f"it has no {name}", None)
        return ""

    return ProviderMetadata(
        issuer=said,
        authorization_endpoint=endpoint("authorization_endpoint"),
        token_endpoint=endpoint("token_endpoint"),
        jwks_uri=endpoint("jwks_uri"),
        userinfo_endpoint=endpoint("userinfo_endpoint", required=False),
        end_session_endpoint=endpoint("end_session_endpoint", required=False),
    )


def unavailable(url: str, reason: str, exc: Exception | None) -> ProviderUnavailable:
    logger.warning("single sign-on: discovery document %s: %s (%s)", url, reason, exc)
    return ProviderUnavailable(
        f"{provider_name()} is unavailable: its discovery document ({url}) could not be read"
        f" ({reason}). Try again later, or sign in with a portal account."
    )


def username_of(claims: dict[str, Any]) -> str:
    """The portal username the claims give, or a refusal that says what is wrong with it."""
    claim = settings.OIDC_USERNAME_CLAIM
    value = claims.get(claim)
    if not isinstance(value, str) or not value:
        raise SignInRefused(
            f"{provider_name()} did not send the {claim!r} claim the portal takes your"
            " username from, so you cannot be signed in. Ask its administrators to release it"
            " to this portal."
        )
    try:
        if len(value) > USERNAME_MAX:
            raise ValidationError("too long")
        UnicodeUsernameValidator()(value)
    except ValidationError:
        shown = value if len(value) <= 40 else value[:40] + "…"
        raise SignInRefused(
            f"{provider_name()} gave the username {shown!r} ({claim!r} claim), which is not"
            f" a valid portal username (letters, digits and . @ + - _, at most {USERNAME_MAX}"
            " characters), so you cannot be signed in."
        ) from None
    return value


def groups_of(claims: dict[str, Any]) -> list[str]:
    """The group names in ``OIDC_GROUPS_CLAIM`` (a list, or one name); none when absent."""
    value = claims.get(settings.OIDC_GROUPS_CLAIM)
    if value is None:
        logger.info("single sign-on: no %r claim: no groups", settings.OIDC_GROUPS_CLAIM)
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [name for name in value if isinstance(name, str)]
    return []


def email_of(claims: dict[str, Any]) -> str | None:
    value = claims.get(settings.OIDC_EMAIL_CLAIM)
    return value if isinstance(value, str) and len(value) <= 254 else None


class OIDCBackend(CheckedSessions, OIDCAuthenticationBackend):  # type: ignore[misc]
    """mozilla-django-oidc's backend, its endpoints from discovery; sessions of its users are
    held to the portal's rule for every account (``CheckedSessions``: an active user)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Not the library's: it reads the endpoints when built, and Django builds a backend for
        # every request of a signed-in user (``get_user``); discovery waits for a sign-in.
        self.UserModel = get_user_model()
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        self.OIDC_RP_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET
        self.OIDC_RP_SIGN_ALGO = settings.OIDC_RP_SIGN_ALGO
        self.OIDC_RP_IDP_SIGN_KEY = None

    # The library's names for the endpoints, read from discovery when a sign-in uses them.
    @property
    def OIDC_OP_TOKEN_ENDPOINT(self) -> str:
        return provider_metadata().token_endpoint

    @property
    def OIDC_OP_USER_ENDPOINT(self) -> str:
        return provider_metadata().userinfo_endpoint

    @property
    def OIDC_OP_JWKS_ENDPOINT(self) -> str:
        return provider_metadata().jwks_uri

    def authenticate(
        self, request: Any, nonce: str | None = None, code_verifier: str | None = None
    ) -> Any:
        """The callback's sign-in (it alone passes a nonce: a password sign-in, whose
        arguments do not fit, never reaches here). A refusal is left on the request for the
        callback view to show, and ``None`` returned, as Django expects of a backend."""
        if request is None or nonce is None:
            return None
        try:
            return super().authenticate(request, nonce=nonce, code_verifier=code_verifier)
        except (SignInRefused, ProviderUnavailable) as exc:
            reason = str(exc)
        except requests.HTTPError as exc:
            reason = provider_error(exc)
        except requests.RequestException as exc:
            reason = f"{provider_name()} did not answer ({type(exc).__name__}): try again later."
        except SuspiciousOperation as exc:
            reason = f"{provider_name()}'s answer could not be verified: {exc}"
        logger.warning("single sign-on refused: %s", reason)
        setattr(request, REFUSAL, reason)
        return None

    def _verify_jws(self, payload: Any, key: Any) -> dict[str, Any]:
        """The signature with the configured algorithm only, the expiry, and the issuer and
        audience (this portal): a token the provider made for another client is refused."""
        try:
            claims: dict[str, Any] = jwt.decode(
                payload,
                key,
                algorithms=[self.OIDC_RP_SIGN_ALGO],
                audience=self.OIDC_RP_CLIENT_ID,
                issuer=provider_metadata().issuer,
                leeway=60,
                options={"require": ["iss", "aud", "sub"]},
            )
        except jwt.PyJWTError as exc:
            raise SignInRefused(f"{provider_name()}'s identity token is not valid: {exc}") from exc
        return claims

    def get_userinfo(self, access_token: str, id_token: str, payload: dict[str, Any]) -> Any:
        """The ID token's claims, updated with the userinfo answer's where the provider has
        one (a provider may put groups in either)."""
        claims = {key: value for key, value in payload.items() if key not in PROTOCOL_CLAIMS}
        if provider_metadata().userinfo_endpoint:
            answer = super().get_userinfo(access_token, id_token, payload)
            if not isinstance(answer, dict) or answer.get("sub") != payload.get("sub"):
                raise SignInRefused(
                    f"{provider_name()}'s userinfo answer is not about the signed-in user."
                )
            claims.update(answer)
        return claims

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]) -> Any:
        claims = self.get_userinfo(access_token, id_token, payload)
        username = username_of(claims)
        with transaction.atomic():
            user: Any = self.UserModel._default_manager.filter(username=username).first()
            if user is None:
                if not settings.OIDC_CREATE_USER:
                    raise SignInRefused(
                        f"{username} has no account on this portal: ask its admins to make it."
                    )
                user = self.UserModel(username=username)
                user.set_unusable_password()
            elif not taken_by_sso(user):
                raise SignInRefused(
                    f"{username} is an account of this portal kept apart from"
                    f" {provider_name()} (a password of its own): sign in with its password."
                )
            elif not user.is_active:
                raise SignInRefused(f"The account {username} is turned off on this portal.")
            email = email_of(claims)
            if email is not None:
                user.email = email
            user.save()
            apply_directory_groups(user, Account.OIDC, groups_of(claims))
        logger.info("single sign-on: %s signed in", username)
        return user


def taken_by_sso(user: Any) -> bool:
    """Whether single sign-on may sign in as ``user``: one of its own accounts, or a local
    account without a password (made for it by an admin)."""
    source = source_of(user)
    return source == Account.OIDC or (source == Account.LOCAL and not user.has_usable_password())


def provider_error(exc: requests.HTTPError) -> str:
    """The provider's OAuth error (``error``, ``error_description``) of a refused token or
    userinfo request, without the rest of its answer."""
    response = exc.response
    try:
        body = response.json() if response is not None else {}
    except ValueError:
        body = {}
    code = body.get("error") if isinstance(body, dict) else None
    detail = body.get("error_description") if isinstance(body, dict) else None
    status = response.status_code if response is not None else "?"
    said = ": ".join(str(part)[:200] for part in (code, detail) if part)
    return f"{provider_name()} refused the sign-in (HTTP {status}{', ' + said if said else ''})."
