"""The pages of single sign-on (OpenID Connect, accounts.oidc), and OpenPAI's paths to
them.

``/oidc/authenticate/`` sends the browser to the provider's sign-in; the provider sends it
back to ``/oidc/callback/`` (the redirect URI a lab registers), which signs the user in and
goes on to the job list, or back to the login page saying why not. Sign-out (``/logout/``)
ends the portal's session and, for a single sign-on session where the provider has an
``end_session_endpoint``, the provider's too (RP-initiated logout), which sends the browser
back to the login page (the post-logout redirect URI a lab registers).

OpenPAI's clients learn from ``GET /api/v1|v2/authn/info`` that sign-in happens in the browser
(``authn_type`` "OIDC", ``loginURI`` ``/api/v1/authn/oidc/login``, fetched with GET), as
OpenPAI's rest-server answers with OIDC on; a signed-in user then makes their tokens with their
session (``POST /api/v2/tokens/application``). Unlike OpenPAI's, the OIDC login does not put a
token in the URL it returns to: it lands on the job list."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import logout
from django.contrib.auth import views as auth_views
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import resolve_url
from django.urls import reverse
from django.views.generic import View
from mozilla_django_oidc.views import (
    OIDCAuthenticationCallbackView,
    OIDCAuthenticationRequestView,
)

from accounts.oidc import (
    REFUSAL,
    ProviderUnavailable,
    provider_metadata,
    provider_name,
)

logger = logging.getLogger(__name__)
# Where mozilla-django-oidc keeps the ID token in the session (OIDC_STORE_ID_TOKEN).
ID_TOKEN_KEY = "oidc_id_token"  # noqa: S105 (the name of a session key)


def require_sso() -> None:
    """The pages' 404 when single sign-on is not set up."""
    if not settings.OIDC_ENABLED:
        raise Http404("single sign-on is not set up (OIDC_ISSUER, OIDC_CLIENT_ID)")


def sso_missing() -> HttpResponse | None:
    """The API's 404 when single sign-on is not set up (OpenPAI's rest-server in basic mode
    has no such route); None when it is."""
    if settings.OIDC_ENABLED:
        return None
    message = "single sign-on is not set up on this portal (OIDC_ISSUER, OIDC_CLIENT_ID)"
    return JsonResponse({"code": "NotFoundError", "message": message}, status=404)


class LoginPageView(auth_views.LoginView):
    """Django's login page (the password form: local and LDAP accounts), with the button of
    single sign-on when it is set up."""

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["sso_name"] = provider_name() if settings.OIDC_ENABLED else ""
        return context


class SignInView(OIDCAuthenticationRequestView):  # type: ignore[misc]
    """``GET /oidc/authenticate/[?next=...]``: to the provider's sign-in page (the
    authorization request, with state, nonce and PKCE kept in the session)."""

    def __init__(self, **kwargs: Any) -> None:
        # Not the library's: it reads the endpoint from settings when built; here it comes
        # from discovery, read in get() where a provider that does not answer can be shown.
        View.__init__(self, **kwargs)

    def get(self, request: HttpRequest) -> HttpResponse:
        require_sso()
        try:
            metadata = provider_metadata()
        except ProviderUnavailable as exc:
            messages.error(request, str(exc))
            return HttpResponseRedirect(reverse("login"))
        self.OIDC_OP_AUTH_ENDPOINT = metadata.authorization_endpoint
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        response: HttpResponse = super().get(request)
        return response


class CallbackView(OIDCAuthenticationCallbackView):  # type: ignore[misc]
    """``GET /oidc/callback/?code=...&state=...`` (or ``?error=...``): the provider's answer.
    Signed in: on to ``next`` or the job list. Not: the login page, saying why."""

    def get(self, request: HttpRequest) -> HttpResponse:
        require_sso()
        try:
            response: HttpResponse = super().get(request)
        except SuspiciousOperation as exc:  # a state this browser's session did not start
            logger.warning("single sign-on callback refused: %s", exc)
            return self.refused("This sign-in has expired or was already used: sign in again.")
        return response

    def login_failure(self) -> HttpResponse:
        request = self.request
        reason = getattr(request, REFUSAL, None)
        if reason is None and request.GET.get("error"):
            said = ": ".join(
                part[:200]
                for part in (request.GET["error"], request.GET.get("error_description"))
                if part
            )
            reason = f"{provider_name()} did not sign you in ({said})."
        return self.refused(
            reason or f"Signing in with {provider_name()} did not complete: sign in again."
        )

    def refused(self, reason: str) -> HttpResponse:
        messages.error(self.request, reason)
        return HttpResponseRedirect(reverse("login"))


class LogoutPageView(auth_views.LogoutView):
    """``POST /logout/``: ends the portal's session; one made by single sign-on goes on to the
    provider's sign-out, which comes back to the login page."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        id_token = request.session.get(ID_TOKEN_KEY)
        response = super().post(request, *args, **kwargs)
        at_provider = provider_logout_url(request, id_token)
        return HttpResponseRedirect(at_provider) if at_provider else response


def provider_logout_url(request: HttpRequest, id_token: str | None) -> str | None:
    """The provider's ``end_session_endpoint`` with ``id_token_hint`` and
    ``post_logout_redirect_uri`` (the login page), or None: not a single sign-on session, or
    a provider without one (or unavailable: the portal's own session is ended all the same)."""
    if not id_token or not settings.OIDC_ENABLED:
        return None
    try:
        endpoint = provider_metadata().end_session_endpoint
    except ProviderUnavailable:
        return None
    if not endpoint:
        return None
    query = urlencode(
        {
            "id_token_hint": id_token,
            "post_logout_redirect_uri": request.build_absolute_uri(
                resolve_url(settings.LOGOUT_REDIRECT_URL)
            ),
            "client_id": settings.OIDC_RP_CLIENT_ID,
        }
    )
    return f"{endpoint}{'&' if '?' in endpoint else '?'}{query}"


def api_oidc_login(request: HttpRequest) -> HttpResponse:
    """OpenPAI's ``GET /api/v1|v2/authn/oidc/login``: a browser is sent to sign in (and then
    to the job list, where the user makes their tokens). No route without single sign-on, as
    OpenPAI's rest-server has none in basic mode."""
    if missing := sso_missing():
        return missing
    return HttpResponseRedirect(reverse("oidc-authenticate"))


def api_oidc_logout(request: HttpRequest) -> HttpResponse:
    """OpenPAI's ``GET /api/v1|v2/authn/oidc/logout``: ends the portal's session and the
    provider's (as OpenPAI's, a GET: the provider's sign-out takes one as well)."""
    if missing := sso_missing():
        return missing
    id_token = request.session.get(ID_TOKEN_KEY)
    logout(request)
    at_provider = provider_logout_url(request, id_token)
    return HttpResponseRedirect(at_provider or resolve_url(settings.LOGOUT_REDIRECT_URL))


def authn_info(api_path: str) -> dict[str, str]:
    """``GET /api/v1|v2/authn/info``: OpenPAI's ``authn_type``, ``loginURI`` and
    ``loginURIMethod`` (its rest-server's routes/authn.js), under the version asked; the
    portal's own ``authnMethod`` and ``loginPath`` (the password login, which local and LDAP
    accounts keep using with single sign-on on); and, with it on, ``logoutURI``."""
    version = "v1" if api_path.startswith("/api/v1/") else "v2"
    basic = f"/api/{version}/authn/basic/login"
    if not settings.OIDC_ENABLED:
        return {
            "authn_type": "basic",
            "authnMethod": "basic",
            "loginURI": basic,
            "loginURIMethod": "post",
            "loginPath": "/api/v2/authn/basic/login",
        }
    return {
        "authn_type": "OIDC",
        "authnMethod": "OIDC",
        "loginURI": f"/api/{version}/authn/oidc/login",
        "loginURIMethod": "get",
        "logoutURI": f"/api/{version}/authn/oidc/logout",
        "loginPath": "/api/v2/authn/basic/login",
    }


def authn_method() -> str:
    """``authnMethod`` of ``GET /api/v2/info``: OpenPAI's "basic" or "OIDC"."""
    return "OIDC" if settings.OIDC_ENABLED else "basic"
