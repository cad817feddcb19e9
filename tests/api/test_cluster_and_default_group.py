"""OpenPAI's getSkuTypes (``/api/v2/cluster/sku-types``) and its built-in ``default`` group,
which every user belongs to (getGroup, getGroupMembers, getAllGroup)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from clusters.models import Node
from tests.api.helpers import client_for

pytestmark = pytest.mark.django_db


def test_getSkuTypes_gives_each_gpu_type_its_share_of_a_node(alice):
    Node.objects.create(name="n1", cpu=16, memory_mb=65536, gpus={"V100": 4})
    Node.objects.create(name="n2", cpu=24, memory_mb=98304, gpus={"V100": 4, "T4": 2})
    response = client_for(alice).get("/api/v2/cluster/sku-types")
    assert response.status_code == 200
    assert response.json() == {
        "T4": {"cpu": 4, "memory": 16384, "gpu": 1},
        "V100": {"cpu": 4, "memory": 16384, "gpu": 1},
    }


def test_getSkuTypes_of_a_cluster_without_gpus_is_empty(alice):
    Node.objects.create(name="n1", cpu=16, memory_mb=65536, gpus={})
    assert client_for(alice).get("/api/v2/cluster/sku-types").json() == {}


def test_getSkuTypes_needs_a_signed_in_user(db):
    assert client_for(None).get("/api/v2/cluster/sku-types").status_code == 401


def test_getGroup_default_exists_without_any_group_configured(alice):
    assert not Group.objects.exists()
    response = client_for(alice).get("/api/v2/groups/default")
    assert response.status_code == 200
    assert response.json()["groupname"] == "default"
    listed = client_for(alice).get("/api/v2/groups").json()
    assert [g["groupname"] for g in listed] == ["default"]


def test_getGroupMembers_of_default_is_every_user(alice, bob, admin):
    body = client_for(admin).get("/api/v2/groups/default/userlist").json()
    assert body == [
        {"username": "admin", "clusterAdmin": True},
        {"username": "alice", "clusterAdmin": False},
        {"username": "bob", "clusterAdmin": False},
    ]


def test_a_created_default_group_takes_the_built_in_ones_place(alice, admin):
    Group.objects.create(name="default").user_set.add(alice)
    body = client_for(admin).get("/api/v2/groups/default/userlist").json()
    assert [m["username"] for m in body] == ["alice"]
    listed = client_for(admin).get("/api/v2/groups").json()
    assert [g["groupname"] for g in listed] == ["default"]


def test_other_missing_groups_stay_404(admin):
    response = client_for(admin).get("/api/v2/groups/nogroup")
    assert (response.status_code, response.json()["code"]) == (404, "NoGroupError")
