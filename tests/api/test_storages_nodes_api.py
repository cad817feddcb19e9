"""Storages (the ones a user may use) and the backend's nodes (admins)."""

from __future__ import annotations

import pytest

from clusters.models import Node, Storage
from tests.api.helpers import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def storages(alice):
    Storage.objects.create(name="shared", open_to_all=True, path="/data/shared")
    Storage.objects.create(name="nfs1", kind=Storage.NFS, server="10.0.0.9", path="/export")
    Storage.objects.create(name="mine", path="/data/alice").users.add(alice)


def names(response):
    return [s["name"] for s in response.json()["storages"]]


def test_a_user_lists_the_storages_they_may_use(alice, bob, storages):
    assert names(client_for(alice).get("/api/v2/storages")) == ["mine", "shared"]
    assert names(client_for(bob).get("/api/v2/storages")) == ["shared"]
    assert names(client_for(alice).get("/api/v2/storages?default=true")) == ["shared"]


def test_an_admin_lists_them_all(admin, storages):
    assert names(client_for(admin).get("/api/v2/storages")) == ["mine", "nfs1", "shared"]


def test_a_storage_detail_has_openpai_fields(admin, storages):
    body = client_for(admin).get("/api/v2/storages/nfs1").json()
    assert body["type"] == "nfs"
    assert body["data"] == {"server": "10.0.0.9", "path": "/export"}


@pytest.mark.parametrize(("who", "code"), [("alice", 200), ("bob", 403), ("admin", 200)])
def test_who_may_read_a_storage(alice, bob, admin, storages, who, code):
    user = {"alice": alice, "bob": bob, "admin": admin}[who]
    assert client_for(user).get("/api/v2/storages/mine").status_code == code


def test_unknown_storage_is_404_and_anonymous_is_401(alice, storages):
    assert client_for(alice).get("/api/v2/storages/nope").json()["code"] == "NoStorageError"
    assert client_for(None).get("/api/v2/storages").status_code == 401


def test_an_admin_lists_the_backends_nodes(admin):
    Node.objects.create(name="n1", cpu=8, memory_mb=16384, gpus={"V100": 2})
    body = client_for(admin).get("/api/v2/kubernetes/nodes").json()
    item = body["items"][0]
    assert item["metadata"]["name"] == "n1"
    assert item["status"]["capacity"] == {"cpu": "8", "memory": "16384Mi", "nvidia.com/gpu": "2"}


def test_nodes_come_from_the_local_backend_when_none_are_cached(admin, backend):
    assert len(client_for(admin).get("/api/v2/kubernetes/nodes").json()["items"]) == 1


@pytest.mark.parametrize(("who", "code"), [("alice", 403), (None, 401)])
def test_only_admins_list_nodes(alice, who, code):
    user = alice if who else None
    assert client_for(user).get("/api/v2/kubernetes/nodes").status_code == code
