"""How the API knows its caller: OpenPAI's ``Authorization: Bearer <token>`` (its rest-server
``src/middlewares/token.js``). What an application token may not do: accounts.permissions.
(DRF imports this module while it loads its views: nothing here may import them.)"""

from __future__ import annotations

from typing import Any

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from accounts.ldap_backend import still_trusted
from accounts.models import ApiToken, hash_token

# OpenPAI's text (token.js ``check``): its SDKs compare it, not only the code.
UNAUTHORIZED_MESSAGE = "Your token is invalid."


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer <token>``, as OpenPAI's clients send it."""

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization: expected 'Bearer <token>'.")
        try:
            token = header[1].decode()
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Authorization: the token is not text.") from None
        found = token_owner(hash_token(token))
        if found is None:  # unknown, expired, revoked, or its user deactivated
            raise exceptions.AuthenticationFailed(UNAUTHORIZED_MESSAGE)
        return found

    def authenticate_header(self, request: Request) -> str:
        return self.keyword  # a 401, with WWW-Authenticate: Bearer, rather than a 403


def token_owner(digest: str) -> tuple[Any, ApiToken] | None:
    """The active user and unexpired token row of ``digest`` (one query, user and account
    joined), while the account may still use it (``still_trusted``: ``LOCAL_ACCOUNTS``, and a
    directory account still in the directory)."""
    rows = ApiToken.objects.active().select_related("user", "user__account")
    row = rows.filter(digest=digest).first()
    if row is None or not still_trusted(row.user):
        return None
    return row.user, row
