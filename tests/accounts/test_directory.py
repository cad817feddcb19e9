"""What a directory's groups grant at sign-in (accounts.directory), whichever sign-in
(LDAP or OIDC) brings them."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User

from accounts.directory import apply_directory_groups, source_of
from accounts.models import Account
from clusters.models import VirtualCluster

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _mapping(settings) -> None:
    settings.DIRECTORY_GROUPS = {"research": "research", "cn-ml": "ml"}
    settings.DIRECTORY_ADMIN_GROUPS = ["portal-admins"]


def names(user: User) -> set[str]:
    return set(user.groups.values_list("name", flat=True))


def test_mapped_groups_are_joined_and_grant_their_virtual_clusters() -> None:
    user = User.objects.create_user("carol")
    research = VirtualCluster.objects.create(name="research")
    research.groups.add(Group.objects.create(name="research"))

    apply_directory_groups(user, Account.LDAP, ["research", "cn-ml", "unmapped"])

    assert names(user) == {"research", "ml"}
    assert VirtualCluster.objects.filter(groups__user=user).get() == research
    assert source_of(user) == Account.LDAP
    assert Account.objects.get(user=user).checked_at is not None


def test_a_group_left_in_the_directory_is_left_here_and_an_admins_own_grants_stay() -> None:
    user = User.objects.create_user("carol")
    given_here = Group.objects.create(name="given-by-an-admin")
    user.groups.add(given_here)
    apply_directory_groups(user, Account.OIDC, ["research", "cn-ml"])

    apply_directory_groups(user, Account.OIDC, ["cn-ml"])

    assert names(user) == {"ml", "given-by-an-admin"}


def test_the_admin_right_follows_the_admin_groups_both_ways() -> None:
    user = User.objects.create_user("carol")
    apply_directory_groups(user, Account.LDAP, ["portal-admins"])
    user.refresh_from_db()
    assert user.is_staff and user.is_superuser

    apply_directory_groups(user, Account.LDAP, ["research"])
    user.refresh_from_db()
    assert not user.is_staff and not user.is_superuser


def test_without_admin_groups_the_directory_leaves_the_admin_right_alone(settings) -> None:
    settings.DIRECTORY_ADMIN_GROUPS = []
    user = User.objects.create_user("carol", is_staff=True)
    apply_directory_groups(user, Account.LDAP, ["research"])
    user.refresh_from_db()
    assert user.is_staff


def test_an_account_without_a_row_is_kept_here() -> None:
    assert source_of(User.objects.create_user("dave")) == Account.LOCAL


def test_an_admin_sees_where_each_account_is_kept_on_its_page(client, admin) -> None:
    client.force_login(admin)
    carol = User.objects.create_user("carol")
    apply_directory_groups(carol, Account.LDAP, ["research"])
    page = client.get("/manage/users/carol/").content.decode()
    assert (
        "Account: LDAP directory; its groups from the directory and its admin right are set "
        "again at each sign-in." in page
    )
    User.objects.create_user("dave")
    page = client.get("/manage/users/dave/").content.decode()
    assert "Account: kept by the portal." in page
