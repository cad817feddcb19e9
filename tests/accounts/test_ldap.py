"""LDAP sign-in against a real slapd (tests/support/slapd.py): the directory's password on the
login page and OpenPAI's login API, its groups as portal groups (and so virtual clusters) and
the admin right, a user removed from the directory refused at sign-in and with what they were
given before, the portal's own accounts beside it (and turned off), and a directory that does
not answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.authentication import token_owner
from accounts.models import Account, hash_token
from clusters.models import VirtualCluster
from tests.accounts.conftest import point_at
from tests.support.slapd import PEOPLE, Slapd, password_of

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def api_login(username: str, password: str):  # type: ignore[no-untyped-def]
    return APIClient().post(
        "/api/v2/authn/basic/login", {"username": username, "password": password}
    )


def token_of(username: str) -> str:
    response = api_login(username, password_of(username))
    assert response.status_code == 200, response.content
    return str(response.json()["token"])


def bearer(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def page_login(username: str, password: str) -> tuple[Client, int, str]:
    client = Client()
    response = client.post("/login/", {"username": username, "password": password})
    return client, response.status_code, response.content.decode()


def signed_in(client: Client) -> bool:
    """Whether the client's session still opens the job list (not a redirect to log in)."""
    return client.get("/jobs/").status_code == 200


@pytest.fixture
def research_vc(db) -> VirtualCluster:
    vc = VirtualCluster.objects.create(name="research")
    vc.groups.add(Group.objects.get_or_create(name="research")[0])
    return vc


def usable(user: User) -> set[str]:
    return set(VirtualCluster.objects.usable_by(user).values_list("name", flat=True))


def test_the_directory_password_signs_in_on_the_login_page(ldap_on, research_vc):
    client, status, _ = page_login("alice-ldap", password_of("alice-ldap"))
    assert status == 302
    assert signed_in(client)
    user = User.objects.get(username="alice-ldap")
    assert (user.email, user.first_name, user.last_name) == (
        "alice-ldap@lab.example",
        "Alice",
        "Liddell",
    )
    assert not user.has_usable_password()  # the directory's password is never stored
    assert user.account.source == Account.LDAP
    assert list(user.groups.values_list("name", flat=True)) == ["research"]
    assert "research" in usable(user)
    assert not user.is_staff


def test_the_openpai_login_api_gives_a_directory_user_a_token(ldap_on, research_vc):
    response = api_login("alice-ldap", password_of("alice-ldap"))
    assert response.status_code == 200
    assert response.json()["user"] == "alice-ldap"
    assert response.json()["admin"] is False
    me = bearer(response.json()["token"]).get("/api/v2/users/me")
    assert me.status_code == 200
    assert "research" in me.json()["virtualCluster"]


def test_the_name_is_the_directorys_whatever_its_case_when_typed(ldap_on):
    response = api_login("Alice-LDAP", password_of("alice-ldap"))
    assert response.json()["user"] == "alice-ldap"
    assert list(User.objects.values_list("username", flat=True)) == ["alice-ldap"]


def test_a_user_in_no_mapped_group_gets_no_group_vc(ldap_on, research_vc):
    token_of("bob-ldap")
    bob = User.objects.get(username="bob-ldap")
    assert not bob.groups.exists()
    assert "research" not in usable(bob)


def test_the_admin_group_makes_an_admin_until_the_next_sign_in_after_leaving_it(ldap_on):
    assert api_login("carol-admin", password_of("carol-admin")).json()["admin"] is True
    carol = User.objects.get(username="carol-admin")
    assert carol.is_staff and carol.is_superuser
    ldap_on.remove_member("portal-admins", "carol-admin")
    assert api_login("carol-admin", password_of("carol-admin")).json()["admin"] is False
    carol.refresh_from_db()
    assert not carol.is_staff and not carol.is_superuser


def test_a_group_left_in_the_directory_is_left_here_at_the_next_check(
    ldap_on, research_vc, settings
):
    token = token_of("alice-ldap")
    alice = User.objects.get(username="alice-ldap")
    assert "research" in usable(alice)
    settings.DIRECTORY_RECHECK_SECONDS = 0
    ldap_on.remove_member("research", "alice-ldap")
    assert bearer(token).get("/api/v2/jobs").status_code == 200  # still in the directory
    assert "research" not in usable(alice)


def test_a_wrong_password_is_refused_on_both_paths(ldap_on):
    response = api_login("alice-ldap", "not-her-password")
    assert response.status_code == 400
    assert "token" not in response.json()
    client, status, page = page_login("alice-ldap", "not-her-password")
    assert status == 200
    assert "Please enter a correct username and password" in page
    assert not signed_in(client)
    assert not User.objects.filter(username="alice-ldap").exists()


def test_a_user_removed_from_the_directory_is_refused_at_sign_in_and_with_an_old_token(
    ldap_on, settings
):
    settings.DIRECTORY_RECHECK_SECONDS = 0
    token = token_of("alice-ldap")
    client, status, _ = page_login("alice-ldap", password_of("alice-ldap"))
    assert bearer(token).get("/api/v2/jobs").status_code == 200
    assert signed_in(client)
    ldap_on.delete_user("alice-ldap")
    assert bearer(token).get("/api/v2/jobs").status_code == 401
    assert not signed_in(client)
    assert not User.objects.get(username="alice-ldap").is_active
    assert api_login("alice-ldap", password_of("alice-ldap")).status_code == 400
    _, status, _ = page_login("alice-ldap", password_of("alice-ldap"))
    assert status == 200  # the form again, not the job list


def test_a_user_removed_from_the_directory_is_refused_at_their_next_sign_in(ldap_on):
    token_of("bob-ldap")
    ldap_on.delete_user("bob-ldap")
    assert api_login("bob-ldap", password_of("bob-ldap")).status_code == 400
    assert not User.objects.get(username="bob-ldap").is_active


def test_a_user_disabled_in_the_directory_counts_as_removed(ldap_on, settings):
    # A filter that leaves disabled accounts out (AD: userAccountControl's bit 2).
    settings.LDAP_USER_FILTER = "(&(uid={username})(!(employeeType=disabled)))"
    settings.DIRECTORY_RECHECK_SECONDS = 0
    token = token_of("bob-ldap")
    ldap_on.modify(
        f"dn: uid=bob-ldap,{PEOPLE}\nchangetype: modify\n"
        "add: employeeType\nemployeeType: disabled\n"
    )
    assert bearer(token).get("/api/v2/jobs").status_code == 401
    assert api_login("bob-ldap", password_of("bob-ldap")).status_code == 400
    assert not User.objects.get(username="bob-ldap").is_active


def test_the_directory_is_asked_again_only_once_the_recheck_period_has_passed(ldap_on):
    token = token_of("alice-ldap")
    ldap_on.delete_user("alice-ldap")
    # The directory's word holds for DIRECTORY_RECHECK_SECONDS (300): no search per request.
    assert bearer(token).get("/api/v2/jobs").status_code == 200
    Account.objects.update(checked_at=timezone.now() - timedelta(seconds=301))
    assert bearer(token).get("/api/v2/jobs").status_code == 401


def test_a_directory_that_does_not_answer_is_trusted_for_twice_the_period_then_not(
    ldap_on, settings
):
    settings.DIRECTORY_RECHECK_SECONDS = 60
    token = token_of("alice-ldap")
    ldap_on.stop()
    Account.objects.update(checked_at=timezone.now() - timedelta(seconds=90))
    assert bearer(token).get("/api/v2/jobs").status_code == 200  # a blip
    Account.objects.update(checked_at=timezone.now() - timedelta(seconds=121))
    assert bearer(token).get("/api/v2/jobs").status_code == 401
    assert User.objects.get(username="alice-ldap").is_active  # refused, not removed
    ldap_on.start()
    assert bearer(token).get("/api/v2/jobs").status_code == 200


def test_a_directory_that_does_not_answer_is_a_clear_sign_in_failure(ldap_on):
    ldap_on.stop()
    response = api_login("alice-ldap", password_of("alice-ldap"))
    assert response.status_code == 503
    assert response.json()["code"] == "DirectoryUnavailableError"
    assert "did not answer" in response.json()["message"]
    client, status, page = page_login("alice-ldap", password_of("alice-ldap"))
    assert status == 200
    assert "The lab&#x27;s directory (LDAP) did not answer" in page
    assert not signed_in(client)


def test_local_accounts_sign_in_beside_the_directory_even_when_it_is_down(ldap_on, alice):
    assert api_login("alice", "alice-secret-pw").status_code == 200
    assert signed_in(page_login("alice", "alice-secret-pw")[0])
    ldap_on.stop()
    token = token_of_local("alice")
    assert bearer(token).get("/api/v2/jobs").status_code == 200
    assert signed_in(page_login("alice", "alice-secret-pw")[0])


def token_of_local(username: str) -> str:
    return str(api_login(username, f"{username}-secret-pw").json()["token"])


def test_local_accounts_off_refuses_a_local_password_token_and_session(ldap_on, alice, settings):
    token = token_of_local("alice")
    client, _, _ = page_login("alice", "alice-secret-pw")
    assert signed_in(client)
    settings.LOCAL_ACCOUNTS = False
    assert bearer(token).get("/api/v2/jobs").status_code == 401
    assert not signed_in(client)
    assert api_login("alice", "alice-secret-pw").status_code == 400
    assert page_login("alice", "alice-secret-pw")[1] == 200
    # The directory's accounts go on.
    assert bearer(token_of("alice-ldap")).get("/api/v2/jobs").status_code == 200


def test_the_directory_does_not_take_over_a_local_account_of_the_same_name(ldap_on):
    User.objects.create_user("bob-ldap", password="local-pw-of-bob")
    assert api_login("bob-ldap", password_of("bob-ldap")).status_code == 400
    assert api_login("bob-ldap", "local-pw-of-bob").status_code == 200
    assert not Account.objects.filter(user__username="bob-ldap", source=Account.LDAP).exists()


def test_a_password_set_here_for_a_directory_account_signs_no_one_in(ldap_on):
    token_of("alice-ldap")
    alice = User.objects.get(username="alice-ldap")
    alice.set_password("set-here-pw")
    alice.save()
    assert api_login("alice-ldap", "set-here-pw").status_code == 400


def test_posix_groups_map_too(ldap_on, research_vc, settings):
    settings.LDAP_GROUP_TYPE = "posixGroup"
    settings.DIRECTORY_GROUPS = {"research-posix": "research"}
    token_of("alice-ldap")
    assert "research" in usable(User.objects.get(username="alice-ldap"))


def test_starttls_with_the_directory_ca(tmp_path: Path, settings, research_vc):
    server = Slapd(tmp_path / "tls", tls=True)
    server.start()
    try:
        point_at(settings, server)
        settings.LDAP_START_TLS = True
        settings.LDAP_CA_FILE = str(server.ca_file)
        assert api_login("alice-ldap", password_of("alice-ldap")).status_code == 200
        # A certificate the portal cannot check (not signed by the system's CAs): refused.
        settings.LDAP_CA_FILE = ""
        assert api_login("alice-ldap", password_of("alice-ldap")).status_code == 503
    finally:
        server.stop()


def test_a_local_accounts_token_costs_the_one_query_it_did(alice, django_assert_num_queries):
    token = token_of_local("alice")
    with django_assert_num_queries(1):
        assert token_owner(hash_token(token)) is not None


def test_without_ldap_settings_the_directory_is_not_asked(slapd, settings, alice):
    assert settings.LDAP_SERVER_URI == ""
    assert settings.AUTHENTICATION_BACKENDS == ["accounts.ldap_backend.LocalAccountBackend"]
    assert api_login("alice-ldap", password_of("alice-ldap")).status_code == 400
    assert api_login("alice", "alice-secret-pw").status_code == 200


def settings_in(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """portal.settings read in a fresh interpreter with ``env`` added to this one's."""
    code = (
        "import json, portal.settings as s; print(json.dumps([s.LOCAL_ACCOUNTS,"
        " s.AUTHENTICATION_BACKENDS, s.LDAP_BIND_PASSWORD, s.LDAP_GROUP_TYPE]))"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_settings_read_from_the_environment(tmp_path: Path):
    secret = tmp_path / "bind-password"
    secret.write_text("from-a-file\n")
    done = settings_in(
        {
            "LDAP_SERVER_URI": "ldaps://ldap.lab.example",
            "LDAP_USER_SEARCH_BASE": "ou=people,dc=lab,dc=example",
            "LDAP_BIND_PASSWORD_FILE": str(secret),
            "LDAP_GROUP_TYPE": "posixGroup",
            "LOCAL_ACCOUNTS": "off",
        }
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [
        False,
        [
            "accounts.ldap_backend.LDAPBackend",
            "accounts.ldap_backend.LocalAccountBackend",
        ],
        "from-a-file",
        "posixGroup",
    ]


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"LOCAL_ACCOUNTS": "maybe"}, "LOCAL_ACCOUNTS must be on or off"),
        ({"LDAP_SERVER_URI": "ldap://x"}, "LDAP_USER_SEARCH_BASE"),
        (
            {
                "LDAP_SERVER_URI": "ldap://x",
                "LDAP_USER_SEARCH_BASE": "dc=x",
                "LDAP_GROUP_TYPE": "g",
            },
            "LDAP_GROUP_TYPE must be groupOfNames",
        ),
        (
            {
                "LDAP_SERVER_URI": "ldap://x",
                "LDAP_USER_SEARCH_BASE": "dc=x",
                "LDAP_USER_FILTER": "(uid=%s)",
            },
            "LDAP_USER_FILTER must hold {username}",
        ),
        ({"DIRECTORY_GROUPS": "research"}, "DIRECTORY_GROUPS: expected key=value"),
        ({"DIRECTORY_GROUPS": "research="}, "DIRECTORY_GROUPS: a group maps to no name"),
    ],
)
def test_a_bad_setting_stops_the_start_naming_it(env: dict[str, str], named: str):
    done = settings_in(env)
    assert done.returncode != 0
    assert named in done.stderr
