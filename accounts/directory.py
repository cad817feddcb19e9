"""What the lab's directory (LDAP) or single sign-on (OIDC) grants a user, applied at each of
their sign-ins: the portal groups its groups map to (and, through them, virtual clusters) and
the admin right.

``DIRECTORY_GROUPS`` names the directory's groups the portal uses and the portal group each
becomes (``research=research,ml-staff=staff``); groups not named there are ignored, and a
user's portal groups that no directory group maps to (given by an admin here) are left alone.
``DIRECTORY_ADMIN_GROUPS``: the directory's groups whose members are admins; when it is set,
an account kept by the directory is an admin exactly while it is in one of them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone

from accounts.models import Account


def portal_groups_of(directory_groups: Iterable[str]) -> set[str]:
    """The portal groups that ``directory_groups`` map to."""
    mapping: dict[str, str] = settings.DIRECTORY_GROUPS
    return {mapping[name] for name in directory_groups if name in mapping}


def is_directory_admin(directory_groups: Iterable[str]) -> bool:
    return bool(set(settings.DIRECTORY_ADMIN_GROUPS) & set(directory_groups))


@transaction.atomic
def apply_directory_groups(user: Any, source: str, directory_groups: Iterable[str]) -> None:
    """Sets ``user``'s account source, mapped portal groups and (when admin groups are set)
    admin right from the groups the directory holds them in, and marks them checked now."""
    held = set(directory_groups)
    wanted = portal_groups_of(held)
    managed = set(settings.DIRECTORY_GROUPS.values())
    current = set(user.groups.filter(name__in=managed).values_list("name", flat=True))
    for name in sorted(wanted - current):
        group, _ = Group.objects.get_or_create(name=name)
        user.groups.add(group)
    if current - wanted:
        user.groups.remove(*Group.objects.filter(name__in=current - wanted))
    if settings.DIRECTORY_ADMIN_GROUPS:
        admin = is_directory_admin(held)
        if (user.is_staff, user.is_superuser) != (admin, admin):
            user.is_staff = user.is_superuser = admin
            user.save(update_fields=["is_staff", "is_superuser"])
    Account.objects.update_or_create(
        user=user, defaults={"source": source, "checked_at": timezone.now()}
    )


def source_of(user: Any) -> str:
    """Where ``user``'s account is kept (``Account.LOCAL`` when no row says otherwise)."""
    account = Account.objects.filter(user_id=user.pk).only("source").first()
    return Account.LOCAL if account is None else account.source
