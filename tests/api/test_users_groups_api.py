"""Users and groups as OpenPAI's contract lists them: admins manage, users see themselves."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User

from clusters.models import VirtualCluster
from jobs import lifecycle
from jobs.models import Job
from tests.api.helpers import client_for
from tests.jobs.samples import hello_job

pytestmark = pytest.mark.django_db


def persona(name, alice, bob, admin):
    return {"alice": alice, "bob": bob, "admin": admin, None: None}[name]


def test_an_admin_lists_users_with_openpai_fields(alice, admin):
    body = client_for(admin).get("/api/v2/users").json()
    assert [u["username"] for u in body] == ["admin", "alice"]
    assert set(body[0]) >= {"username", "admin", "virtualCluster", "storageConfig", "email"}
    assert body[0]["admin"] is True


@pytest.mark.parametrize(("who", "code"), [("alice", 403), ("admin", 200), (None, 401)])
def test_who_may_list_users(alice, bob, admin, who, code):
    assert client_for(persona(who, alice, bob, admin)).get("/api/v2/users").status_code == code


def test_an_admin_creates_a_user_in_a_virtual_cluster(admin):
    VirtualCluster.objects.create(name="research")
    new = {"username": "carol", "password": "carol-pw-123", "virtualCluster": ["research"]}
    response = client_for(admin).post("/api/v2/users", new, format="json")
    assert response.status_code == 201
    carol = User.objects.get(username="carol")
    assert carol.check_password("carol-pw-123")
    assert list(carol.virtual_clusters.values_list("name", flat=True)) == ["research"]
    again = client_for(admin).post("/api/v2/users", new, format="json")
    assert (again.status_code, again.json()["code"]) == (409, "ConflictUserError")


def test_a_user_created_alongside_by_another_request_is_a_409_not_a_500(admin, monkeypatch):
    from accounts.api import users as users_api

    real = users_api.checked_password

    def meanwhile(password, user):  # another request creates carol after this one checked
        User.objects.create_user("carol")
        return real(password, user)

    monkeypatch.setattr(users_api, "checked_password", meanwhile)
    new = {"username": "carol", "password": "carol-pw-123"}
    response = client_for(admin).post("/api/v2/users", new, format="json")
    assert (response.status_code, response.json()["code"]) == (409, "ConflictUserError")


def test_an_unknown_virtual_cluster_is_a_400_naming_it(admin):
    new = {"username": "carol", "password": "carol-pw-123", "virtualCluster": ["nope"]}
    response = client_for(admin).post("/api/v2/users", new, format="json")
    assert response.status_code == 400
    assert "virtualCluster" in response.json()["message"]
    assert not User.objects.filter(username="carol").exists()


def test_an_admin_updates_a_user(alice, admin):
    VirtualCluster.objects.create(name="research")
    change = {"data": {"username": "alice", "admin": True, "virtualCluster": ["research"]}}
    assert client_for(admin).put("/api/v2/users", change, format="json").status_code == 201
    alice.refresh_from_db()
    assert alice.is_staff
    assert "research" in client_for(admin).get("/api/v2/users/alice").json()["virtualCluster"]


def test_updating_a_missing_user_is_404(admin):
    change = {"data": {"username": "ghost", "email": ""}}
    response = client_for(admin).put("/api/v2/users", change, format="json")
    assert (response.status_code, response.json()["code"]) == (404, "NoUserError")


def test_a_user_reads_self_but_not_others(alice, bob):
    assert client_for(alice).get("/api/v2/users/alice").status_code == 200
    assert client_for(alice).get("/api/v2/users/bob").status_code == 403
    assert client_for(alice).get("/api/v2/users/me").json()["username"] == "alice"


def test_an_admin_deletes_a_user_but_not_self(alice, admin):
    assert client_for(alice).delete("/api/v2/users/bob").status_code == 403
    assert client_for(admin).delete("/api/v2/users/alice").status_code == 200
    assert client_for(admin).delete("/api/v2/users/alice").status_code == 404
    assert client_for(admin).delete("/api/v2/users/admin").status_code == 403


def test_a_user_with_live_jobs_is_not_deleted_until_they_have_ended(alice, admin):
    lifecycle.submit(alice, hello_job("one"))
    second = lifecycle.submit(alice, hello_job("two"))
    response = client_for(admin).delete("/api/v2/users/alice")
    assert response.status_code == 409
    assert "2 live jobs" in response.json()["message"]
    assert User.objects.filter(username="alice").exists() and Job.objects.count() == 2
    for job in Job.objects.all():
        lifecycle.stop(job, admin)
    assert Job.objects.get(pk=second.pk).state == "STOPPED"
    assert client_for(admin).delete("/api/v2/users/alice").status_code == 200
    assert not Job.objects.exists()


def test_the_admin_site_does_not_delete_a_user_with_live_jobs(alice, admin):
    from django.test import Client

    lifecycle.submit(alice, hello_job())
    web = Client()
    web.force_login(admin)
    page = web.post(f"/admin/auth/user/{alice.pk}/delete/", {"post": "yes"})
    assert page.status_code == 200
    assert "user alice has 1 live job" in page.content.decode()
    bulk = {"action": "delete_selected", "_selected_action": [alice.pk], "post": "yes"}
    web.post("/admin/auth/user/", bulk)
    assert User.objects.filter(username="alice").exists()


def test_a_user_changes_own_email_and_password_with_the_old_one(alice):
    change = {"data": {"email": "a@example.org", "newPassword": "new-password-1"}}
    wrong = {"data": {**change["data"], "oldPassword": "wrong"}}
    right = {"data": {**change["data"], "oldPassword": "alice-secret-pw"}}
    client = client_for(alice)
    assert client.put("/api/v2/users/me", change, format="json").status_code == 400
    refused = client.put("/api/v2/users/me", wrong, format="json")
    assert (refused.status_code, refused.json()["code"]) == (400, "IncorrectPasswordError")
    assert client.put("/api/v2/users/me", right, format="json").status_code == 201
    alice.refresh_from_db()
    assert (alice.email, alice.check_password("new-password-1")) == ("a@example.org", True)


def test_a_user_may_not_change_someone_else_through_me(alice):
    change = {"data": {"username": "bob", "email": "x@example.org"}}
    assert client_for(alice).put("/api/v2/users/me", change, format="json").status_code == 403


def test_groups_are_created_listed_and_deleted_by_admins(alice, admin):
    client = client_for(admin)
    assert client.post("/api/v2/groups", {"groupname": "ml"}, format="json").status_code == 201
    assert client.post("/api/v2/groups", {"groupname": "ml"}, format="json").status_code == 409
    assert client_for(alice).get("/api/v2/groups").json()[0]["groupname"] == "ml"
    assert client_for(alice).get("/api/v2/groups/ml").status_code == 200
    assert client_for(alice).delete("/api/v2/groups/ml").status_code == 403
    assert client_for(alice).post("/api/v2/groups", {"groupname": "x"}).status_code == 403
    assert client.delete("/api/v2/groups/ml").status_code == 201
    assert client.get("/api/v2/groups/ml").status_code == 404
    assert client_for(None).get("/api/v2/groups").status_code == 401


def test_group_membership_through_group_grouplist_and_userlist(alice, admin):
    Group.objects.create(name="ml")
    Group.objects.create(name="vision")
    client = client_for(admin)
    response = client.put("/api/v2/users/alice/group/", {"groupname": "ml"}, format="json")
    assert response.status_code == 201
    assert client.get("/api/v2/groups/ml/userlist").json() == [
        {"username": "alice", "clusterAdmin": False}
    ]
    client.put("/api/v2/users/alice/grouplist", {"grouplist": ["vision"]}, format="json")
    assert client.get("/api/v2/users/alice").json()["grouplist"] == ["vision"]
    client.delete("/api/v2/users/alice/group", {"groupname": "vision"}, format="json")
    assert list(alice.groups.all()) == []
    missing = client.put("/api/v2/users/alice/group", {"groupname": "nope"}, format="json")
    assert (missing.status_code, missing.json()["code"]) == (404, "NoGroupError")


def test_a_group_gives_its_virtual_clusters(alice, admin):
    group = Group.objects.create(name="ml")
    VirtualCluster.objects.create(name="gpu").groups.add(group)
    client_for(admin).put("/api/v2/users/alice/group", {"groupname": "ml"}, format="json")
    assert "gpu" in client_for(alice).get("/api/v2/users/me").json()["virtualCluster"]


def test_membership_is_admin_only(alice, bob):
    Group.objects.create(name="ml")
    client = client_for(alice)
    assert client.put("/api/v2/users/alice/group", {"groupname": "ml"}).status_code == 403
    assert client.get("/api/v2/groups/ml/userlist").status_code == 403
