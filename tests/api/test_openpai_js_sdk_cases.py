"""The cases of OpenPAI's JS SDK test suite (openpaisdk ``tests/common/apiTestCaseGenerator``
defaults and its customized tests) that assert an error's code and text: login errors, an
invalid token, application tokens and non-admins refused with OpenPAI's words, the built-in
``default`` group in a user's grouplist, and an admin resetting a password."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from rest_framework.test import APIClient

from accounts.models import ApiToken
from apikit.throttling import AnonRateThrottle
from clusters.models import VirtualCluster
from tests.api.helpers import client_for

pytestmark = pytest.mark.django_db

LOGIN = "/api/v2/authn/basic/login"
# The SDK's ``unauthorizedToken``: a JWT this portal never issued.
UNAUTHORIZED_TOKEN = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ1c2VybmFtZSI6InlpeWkiLCJhcHBsaWNhdGlvbiI6ZmFsc2"
    "UsImlhdCI6MTU4ODgzNDQyNCwiZXhwIjoxNTg5NDM5MjI0fQ.1GHA3t8Moy_y9_sTJA3VTWkNbw1jlw0ef6dKXJX8yYo"
)
INVALID_TOKEN = {"code": "UnauthorizedUserError", "message": "Your token is invalid."}
APPLICATIONS = {
    "code": "ForbiddenUserError",
    "message": "Applications are not allowed to do this operation.",
}
NON_ADMIN = {
    "code": "ForbiddenUserError",
    "message": "Non-admin is not allow to do this operation.",
}


def bearer(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def login(username: str, password: str) -> Any:
    return APIClient().post(LOGIN, {"username": username, "password": password})


# --- basicLogin ------------------------------------------------------------------------------


def test_login_of_a_nonexistent_user_answers_openpais_NoUserError(db):
    response = login("nonexistentuser", "password")
    assert response.status_code == 400
    assert response.json() == {
        "code": "NoUserError",
        "message": "User nonexistentuser is not found.",
    }


def test_login_with_an_incorrect_password_answers_openpais_IncorrectPasswordError(alice):
    response = login("alice", "incorrectpassword")
    assert response.status_code == 400
    assert response.json() == {
        "code": "IncorrectPasswordError",
        "message": "Password is incorrect.",
    }


def test_login_of_a_deactivated_user_is_not_told_apart_from_an_unknown_one(alice):
    User.objects.filter(pk=alice.pk).update(is_active=False)
    response = login("alice", "alice-secret-pw")
    assert (response.status_code, response.json()["code"]) == (400, "NoUserError")


def test_API_LOGIN_HIDES_UNKNOWN_USERS_answers_an_unknown_user_as_a_wrong_password(alice, settings):
    settings.API_LOGIN_HIDES_UNKNOWN_USERS = True
    unknown, wrong = login("nonexistentuser", "password"), login("alice", "incorrectpassword")
    assert (unknown.status_code, unknown.json()) == (wrong.status_code, wrong.json())
    assert wrong.json()["code"] == "IncorrectPasswordError"


def test_login_attempts_stay_rate_limited_per_address_whatever_they_answer(alice, monkeypatch):
    monkeypatch.setattr(AnonRateThrottle, "THROTTLE_RATES", {"anon": "3/minute"})
    monkeypatch.setattr(AnonRateThrottle, "timer", lambda self: 600.0)
    tries = [("nonexistentuser", "password"), ("alice", "wrong-pw"), ("bob", "x"), ("alice", "y")]
    codes = [login(name, password).status_code for name, password in tries]
    assert codes == [400, 400, 400, 429]
    assert login("alice", "alice-secret-pw").status_code == 429  # even the right password


# --- an invalid token ------------------------------------------------------------------------


def test_getTokens_with_an_unauthorized_token_answers_UnauthorizedUserError(db):
    response = bearer(UNAUTHORIZED_TOKEN).get("/api/v2/tokens")
    assert (response.status_code, response.json()) == (401, INVALID_TOKEN)


def test_logout_with_an_incorrect_token_answers_your_token_is_invalid(db):
    response = bearer(UNAUTHORIZED_TOKEN).delete("/api/v2/authn/basic/logout")
    assert (response.status_code, response.json()) == (401, INVALID_TOKEN)


def test_a_call_without_a_token_answers_openpais_guest_message(db):
    response = APIClient().get("/api/v2/tokens")
    assert response.status_code == 401
    assert response.json() == {
        "code": "UnauthorizedUserError",
        "message": "Guest is not allowed to do this operation.",
    }


# --- application tokens (OpenPAI's checkNotApplication) --------------------------------------

NEW_USER = {"username": "sdk_test_user", "password": "test_password"}
# (method, path, body) of each operation an application token may not do, even an admin's.
APPLICATION_REFUSED = [
    ("post", "/api/v2/users", NEW_USER),
    ("put", "/api/v2/users", {"data": {"username": "alice", "email": "new@test.com"}}),
    ("delete", "/api/v2/users/alice", None),
    ("put", "/api/v2/users/me", {"data": {"email": "me@test.com"}}),
    ("put", "/api/v2/users/alice/group", {"groupname": "sdktestgroup"}),
    ("delete", "/api/v2/users/alice/group", {"groupname": "sdktestgroup"}),
    ("put", "/api/v2/users/alice/grouplist", {"grouplist": ["default"]}),
    ("put", "/api/v2/user/alice/password", {"newPassword": "new-password"}),
    ("put", "/api/v2/user/alice/email", {"email": "x@test.com"}),
    ("post", "/api/v2/groups", {"groupname": "newgroup"}),
    ("put", "/api/v2/groups", {"data": {"groupname": "sdktestgroup"}}),
    ("delete", "/api/v2/groups/sdktestgroup", None),
    ("get", "/api/v2/tokens", None),
    ("post", "/api/v2/tokens/application", None),
    # routes/v2/virtual-cluster.js: checkNotApplication on every change too
    ("put", "/api/v2/virtual-clusters/newvc", {"vcCapacity": 10}),
    ("delete", "/api/v2/virtual-clusters/default", None),
    ("put", "/api/v2/virtual-clusters/default/status", {"vcStatus": "stopped"}),
]


@pytest.mark.parametrize(("method", "path", "body"), APPLICATION_REFUSED)
def test_an_application_token_may_not_manage_users_groups_or_tokens(
    alice, admin, method, path, body
):
    Group.objects.create(name="sdktestgroup")
    _, token = ApiToken.objects.issue(admin, 3600, kind="application")
    response = getattr(bearer(token), method)(path, body, format="json")
    assert (response.status_code, response.json()) == (403, APPLICATIONS)
    assert not User.objects.filter(username="sdk_test_user").exists()
    assert User.objects.filter(username="alice", email="").exists()
    assert list(VirtualCluster.objects.values_list("name", "stopped")) in ([], [("default", False)])


def test_a_non_admin_changing_a_virtual_cluster_answers_openpais_text(alice):
    response = bearer(ApiToken.objects.issue(alice, 3600)[1]).put(
        "/api/v2/virtual-clusters/default/status", {"vcStatus": "stopped"}, format="json"
    )
    assert (response.status_code, response.json()) == (
        403,
        {"code": "ForbiddenUserError", "message": "Non-admin is not allow to do this operation."},
    )


def test_an_application_token_may_not_revoke_a_token(admin):
    _, token = ApiToken.objects.issue(admin, 3600, kind="application")
    _, other = ApiToken.objects.issue(admin, 3600)
    response = bearer(token).delete(f"/api/v2/tokens/{other}")
    assert (response.status_code, response.json()) == (403, APPLICATIONS)
    assert ApiToken.objects.count() == 2


def test_an_application_token_still_reads_users_and_groups(alice):
    _, token = ApiToken.objects.issue(alice, 3600, kind="application")
    client = bearer(token)
    assert client.get("/api/v2/users/me").json()["username"] == "alice"
    assert client.get("/api/v2/groups/default").status_code == 200


def test_a_persons_token_manages_tokens_as_before(alice):
    _, token = ApiToken.objects.issue(alice, 3600)
    client = bearer(token)
    created = client.post("/api/v2/tokens/application")
    assert created.status_code == 200
    assert client.delete(f"/api/v2/tokens/{created.json()['token']}").status_code == 200


# --- a non-admin's token ---------------------------------------------------------------------

NON_ADMIN_REFUSED = [
    ("post", "/api/v2/users", NEW_USER),
    ("put", "/api/v2/users", {"data": {"username": "sdk_test_user", "email": "e@test.com"}}),
    ("delete", "/api/v2/users/bob", None),
    ("put", "/api/v2/users/bob/group", {"groupname": "sdktestgroup"}),
    ("delete", "/api/v2/users/bob/group", {"groupname": "sdktestgroup"}),
    ("put", "/api/v2/users/bob/grouplist", {"grouplist": ["default"]}),
]


@pytest.mark.parametrize(("method", "path", "body"), NON_ADMIN_REFUSED)
def test_a_non_admins_user_operation_answers_openpais_ForbiddenUserError(
    alice, bob, method, path, body
):
    Group.objects.create(name="sdktestgroup")
    response = getattr(client_for(alice), method)(path, body, format="json")
    assert (response.status_code, response.json()) == (403, NON_ADMIN)


# --- the built-in default group in a grouplist -----------------------------------------------


def test_replacing_a_users_grouplist_with_default_works_as_in_openpai(alice, admin):
    alice.groups.add(Group.objects.create(name="ml"))
    response = client_for(admin).put(
        "/api/v2/users/alice/grouplist/", {"grouplist": ["default"]}, format="json"
    )
    assert response.status_code == 201, response.content
    assert list(alice.groups.all()) == []  # in no created group; in default, as every user
    members = client_for(admin).get("/api/v2/groups/default/userlist").json()
    assert "alice" in [m["username"] for m in members]


def test_replacing_a_nonexistent_users_grouplist_is_404(admin):
    response = client_for(admin).put(
        "/api/v2/users/non_exist_user/grouplist", {"grouplist": ["default"]}, format="json"
    )
    assert (response.status_code, response.json()["code"]) == (404, "NoUserError")


def test_a_grouplist_with_default_and_an_unknown_group_names_the_unknown_one(alice, admin):
    response = client_for(admin).put(
        "/api/v2/users/alice/grouplist", {"grouplist": ["default", "nope"]}, format="json"
    )
    assert (response.status_code, response.json()["code"]) == (404, "NoGroupError")
    assert "nope" in response.json()["message"]


def test_a_created_default_group_is_set_in_a_grouplist_like_any_group(alice, admin):
    created = Group.objects.create(name="default")
    client_for(admin).put(
        "/api/v2/users/alice/grouplist", {"grouplist": ["default"]}, format="json"
    )
    assert list(alice.groups.all()) == [created]


def test_adding_a_user_to_the_built_in_default_group_succeeds(alice, admin):
    response = client_for(admin).put(
        "/api/v2/users/alice/group", {"groupname": "default"}, format="json"
    )
    assert response.status_code == 201
    assert response.json()["message"] == "User alice is added into group default"


def test_removing_a_user_from_the_built_in_default_group_is_refused_naming_the_field(alice, admin):
    response = client_for(admin).delete(
        "/api/v2/users/alice/group", {"groupname": "default"}, format="json"
    )
    assert response.status_code == 403
    assert response.json()["message"].startswith("groupname: every user is in")


# --- an admin resets a password without the old one -------------------------------------------


def test_an_admin_resets_another_users_password_without_the_old_one(alice, admin):
    change = {
        "data": {
            "username": "alice",
            "email": "new_email@test2.com",
            "virtualCluster": ["default"],
            "admin": False,
            "password": "new_test_password",
            "extension": {},
        },
        "patch": False,
    }
    response = client_for(admin).put("/api/v2/users", change, format="json")
    assert response.status_code == 201, response.content
    assert login("alice", "new_test_password").status_code == 200


def test_an_admin_resets_a_password_on_the_older_path_without_the_old_one(alice, admin):
    url = "/api/v2/user/alice/password"
    response = client_for(admin).put(url, {"newPassword": "reset-by-admin"}, format="json")
    assert response.status_code == 201, response.content
    assert login("alice", "reset-by-admin").status_code == 200


def test_a_non_admin_changing_their_own_password_still_needs_the_old_one(alice, bob):
    url = "/api/v2/user/alice/password"
    client = client_for(alice)
    missing = client.put(url, {"newPassword": "brand-new-pw"}, format="json")
    assert (missing.status_code, missing.json()["code"]) == (400, "IncorrectPasswordError")
    other = client.put("/api/v2/user/bob/password", {"newPassword": "brand-new-pw"}, format="json")
    assert (other.status_code, other.json()) == (403, NON_ADMIN)
    assert login("alice", "alice-secret-pw").status_code == 200
