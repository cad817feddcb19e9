from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from portal.accounts.models import ApiToken, hash_token
from portal.sql import columns, table


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
        if found is None:
            raise exceptions.AuthenticationFailed("Authorization: the token is unknown or expired.")
        return found

    def authenticate_header(self, request: Request) -> str:
        return self.keyword  # a 401, with WWW-Authenticate: Bearer, rather than a 403


def token_owner(digest: str) -> tuple[Any, ApiToken] | None:
    """The active user and unexpired token row of ``digest``, in one statement.

    Every API call pays for this, so the statement is written out: built by the ORM
    (``ApiToken.objects.active().select_related("user")``) it cost three times as much CPU.
    """
    user_model = get_user_model()
    sql = (
        f"SELECT {columns(user_model, 'u')}, t.id AS token_id, t.kind AS token_kind"  # noqa: S608 - names from the models
        f" FROM {table(ApiToken)} t JOIN {table(user_model)} u ON u.id = t.user_id"
        " WHERE t.digest = %s AND t.expires_at > %s AND u.is_active"
    )
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    rows = user_model.objects.raw(sql, [digest, now])
    for user in rows:  # the digest is unique: one row at most
        fields = ["id", "user_id", "digest", "kind"]  # the others load if asked for
        row = ApiToken.from_db(
            connection.alias, fields, [user.token_id, user.pk, digest, user.token_kind]
        )
        row.user = user
        return user, row
    return None
