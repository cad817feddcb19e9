from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def issue(self, user: object, seconds: int, kind: str = "session") -> tuple[ApiToken, str]:
        """A new token for ``user``; the clear text is returned once and stored only hashed."""
        token = secrets.token_urlsafe(32)
        row = self.create(
            user=user,
            digest=hash_token(token),
            prefix=token[:8],
            kind=kind,
            expires_at=timezone.now() + timedelta(seconds=seconds),
        )
        return row, token

    def active(self) -> ApiTokenQuerySet:
        return self.filter(expires_at__gt=timezone.now(), user__is_active=True)


class ApiToken(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    digest = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=8, blank=True)  # enough to tell tokens apart in a list
    kind = models.CharField(max_length=16, default="session")  # session | application
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()

    objects = ApiTokenQuerySet.as_manager()

    def __str__(self) -> str:
        return f"{self.kind} token of {self.user_id}"


class Account(models.Model):
    """Where a user's account is kept: here (a password the portal stores) or in the lab's
    directory (LDAP) or single sign-on (OIDC), whose groups set the user's portal groups and
    admin right at each sign-in (accounts.directory). ``checked_at``: when the directory last
    confirmed the account (an LDAP account is looked up again before a token or session of it
    is trusted past ``DIRECTORY_RECHECK_SECONDS``)."""

    LOCAL, LDAP, OIDC = "local", "ldap", "oidc"
    SOURCES = [(LOCAL, "kept by the portal"), (LDAP, "LDAP directory"), (OIDC, "single sign-on")]

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="account"
    )
    source = models.CharField(max_length=8, choices=SOURCES, default=LOCAL)
    checked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.user_id} ({self.source})"
