"""Who may sign in, and whose token or session may still be used, when accounts are kept in
two places: the lab's LDAP directory (:class:`LDAPBackend`) and the portal itself
(:class:`LocalAccountBackend`, Django's ModelBackend held to ``LOCAL_ACCOUNTS``).

:func:`still_trusted` is the one rule for a token or session made before: the token
authentication calls it, and so does each backend's ``get_user``, which Django's session
middleware (``request.user``, lazily: a request that never reads it costs nothing) and
Channels' WebSocket auth call for every request, so that no middleware is needed and a
WebSocket is held to the same rule as a page."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from accounts import ldap
from accounts.directory import apply_directory_groups, source_of
from accounts.models import Account

logger = logging.getLogger(__name__)


class DirectoryDown(ValidationError):
    """The directory did not answer a sign-in. Raised out of ``authenticate()`` (so that the
    sign-in is not taken for a wrong password): the login form shows it as its error, and the
    API's login answers 503 with it."""

    def __init__(self) -> None:
        super().__init__(
            "The lab's directory (LDAP) did not answer: try again in a minute.",
            code="directory_unavailable",
        )


class CheckedSessions:
    """A session's user, loaded with their account (one query, as ModelBackend's) and given
    only while :func:`still_trusted` says so."""

    def get_user(self, user_id: Any) -> Any:
        user = get_user_model()._default_manager.select_related("account").filter(pk=user_id)
        found = user.first()
        if found is None or not found.is_active or not still_trusted(found):
            return None
        return found

    async def aget_user(self, user_id: Any) -> Any:
        return await sync_to_async(self.get_user)(user_id)


class LocalAccountBackend(CheckedSessions, ModelBackend):
    """The portal's own accounts (a password it stores): while ``LOCAL_ACCOUNTS`` is on, and
    only those kept here, so that a password set here for a directory account signs no one in
    past the directory."""

    def user_can_authenticate(self, user: Any) -> bool:
        return (
            settings.LOCAL_ACCOUNTS
            and super().user_can_authenticate(user)
            and source_of(user) == Account.LOCAL
        )


class LDAPBackend(CheckedSessions, ModelBackend):
    """The directory's password; the user (made on their first sign-in) gets the directory's
    username, e-mail, names, groups and admin right at each sign-in. A name the portal keeps a
    local account of is left to :class:`LocalAccountBackend`: the directory does not take over
    the first admin (nor any local account) by holding an entry of the same name."""

    def authenticate(
        self, request: Any, username: str | None = None, password: str | None = None, **_: Any
    ) -> Any:
        if not ldap.configured() or not username or not password:
            return None
        known = get_user_model()._default_manager.filter(username=username).first()
        if known is not None and source_of(known) == Account.LOCAL:
            return None
        try:
            entry = ldap.find(username)
            if entry is None:
                if known is not None and source_of(known) == Account.LDAP:
                    deactivate(known)
                return None
            if not ldap.password_matches(entry, password):
                return None
        except ldap.DirectoryUnavailable as exc:
            logger.warning("LDAP sign-in of %r: the directory did not answer: %s", username, exc)
            raise DirectoryDown() from exc
        return self._portal_user(entry)

    @transaction.atomic
    def _portal_user(self, entry: ldap.DirectoryUser) -> Any:
        model = get_user_model()
        user: Any = model._default_manager.filter(username=entry.username).first()
        if user is None:
            user = model(username=entry.username)
            user.set_unusable_password()  # the directory's password is checked, never stored
        elif source_of(user) != Account.LDAP:
            logger.warning("LDAP: %s is a portal account of another kind; refused", user)
            return None
        if not user.is_active:
            return None  # removed from the directory once, or turned off by an admin here
        user.email = entry.email
        user.first_name, user.last_name = entry.first_name[:150], entry.last_name[:150]
        user.save()
        apply_directory_groups(user, Account.LDAP, entry.groups)
        return user


def still_trusted(user: Any) -> bool:
    """Whether a token or session made earlier for ``user`` (an active user, loaded with
    ``select_related("account")`` where the caller counts queries) may still be used.

    An account kept by the portal: while ``LOCAL_ACCOUNTS`` is on. One kept by the directory:
    while the directory confirmed it less than ``DIRECTORY_RECHECK_SECONDS`` ago; past that, it
    is looked up again (a service bind and a search): found, its groups and admin right are
    updated and the answer holds for another period; not found (removed, or left out by the
    filter as disabled), the user is deactivated. A directory that does not answer is not
    held against anyone for a blip: the account stays trusted until twice the period has
    passed since it was last confirmed, then is refused (not deactivated) until the
    directory answers again. Single sign-on accounts follow their own rules (not here)."""
    try:
        account: Account | None = user.account
    except Account.DoesNotExist:
        account = None
    source = Account.LOCAL if account is None else account.source
    if source == Account.LOCAL:
        return bool(settings.LOCAL_ACCOUNTS)
    if source != Account.LDAP:
        return True
    assert account is not None
    period = timedelta(seconds=settings.DIRECTORY_RECHECK_SECONDS)
    age = None if account.checked_at is None else timezone.now() - account.checked_at
    if age is not None and age < period:
        return True
    try:
        if not ldap.configured():
            raise ldap.DirectoryUnavailable("LDAP_SERVER_URI is not set")
        entry = ldap.find(user.get_username())
    except ldap.DirectoryUnavailable as exc:
        trusted = age is not None and age < 2 * period
        logger.warning(
            "LDAP: could not check %s again (%s); %s",
            user,
            exc,
            "still trusted for now" if trusted else "refused until the directory answers",
        )
        return trusted
    if entry is None:
        deactivate(user)
        return False
    apply_directory_groups(user, Account.LDAP, entry.groups)
    return True


def deactivate(user: Any) -> None:
    """The directory no longer holds ``user``: no sign-in, token or session of theirs works
    (an admin may turn the account on again on the Users page)."""
    logger.info("LDAP: %s is no longer in the directory; deactivated", user)
    user.is_active = False
    user.save(update_fields=["is_active"])
