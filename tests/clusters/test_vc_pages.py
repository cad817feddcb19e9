"""Virtual cluster pages for everyone; /manage/ pages for admins only."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from clusters.models import DefaultVirtualCluster, VirtualCluster
from jobs import lifecycle
from tests.clusters.helpers import cluster, job_text, vc

pytestmark = pytest.mark.django_db


def test_the_list_shows_bars_for_each_virtual_cluster(client, alice):
    cluster(cpu=8, gpus={"V100": 4})
    vc("research", alice, cpu=4, gpus={"V100": 2})
    client.force_login(alice)
    page = client.get("/virtual-clusters/").content.decode()
    assert 'id="vc-research"' in page and "GPU (V100)" in page
    assert "0 used / 2 guaranteed / 4 total" in page


def test_the_detail_shows_the_queue_in_order_and_the_members(client, alice):
    vc("research", alice, cpu=1)
    lifecycle.submit(alice, job_text("j1"), virtual_cluster="research")
    client.force_login(alice)
    page = client.get("/virtual-clusters/research/").content.decode()
    assert "alice~j1" in page and '<ul id="members"><li>alice</li>' in page


@pytest.mark.parametrize(
    "path",
    [
        "/manage/virtual-clusters/",
        "/manage/virtual-clusters/new/",
        "/manage/users/",
        "/manage/nodes/",
    ],
)
def test_manage_pages_are_for_admins_only(client, bob, admin, path):
    client.force_login(bob)
    assert client.get(path).status_code == 403
    client.force_login(admin)
    assert client.get(path).status_code == 200


def test_an_admin_creates_a_virtual_cluster_within_capacity(client, admin):
    cluster(cpu=8)
    client.force_login(admin)
    form = {
        "name": "research",
        "description": "",
        "cpu": "4",
        "memory_mb": "",
        "gpus": '{"V100": 0}',
    }
    assert client.post("/manage/virtual-clusters/new/", form).status_code == 302
    assert VirtualCluster.objects.get(name="research").gpus == {"V100": 0}
    form["name"], form["cpu"] = "more", "5"
    page = client.post("/manage/virtual-clusters/new/", form).content.decode()
    assert "cpu: guaranteed quotas would sum to 9, 1 more than the cluster&#x27;s 8" in page


def test_deleting_a_virtual_cluster_with_live_jobs_is_refused(client, admin, alice):
    vc("research", alice, cpu=4)
    lifecycle.submit(alice, job_text("j"), virtual_cluster="research")
    client.force_login(admin)
    client.post("/manage/virtual-clusters/research/delete/")
    assert VirtualCluster.objects.filter(name="research").exists()


def test_an_admin_creates_a_user_and_assigns_virtual_clusters(client, admin):
    research = vc("research", cpu=4)
    client.force_login(admin)
    client.post("/manage/users/", {"username": "carol", "password": "carol-secret-pw"})
    carol = User.objects.get(username="carol")
    form = {
        "is_active": "on",
        "is_staff": "on",
        "virtual_clusters": [research.id],
        "default_vc": research.id,
    }
    assert client.post("/manage/users/carol/", form).status_code == 302
    carol.refresh_from_db()
    assert carol.is_staff and list(carol.virtual_clusters.all()) == [research]
    assert DefaultVirtualCluster.objects.get(user=carol).virtual_cluster == research


def test_an_admin_disables_a_user(client, admin, bob):
    client.force_login(admin)
    client.post("/manage/users/bob/", {})
    bob.refresh_from_db()
    assert not bob.is_active


def test_the_job_list_and_api_show_why_a_job_waits(client, alice):
    vc("research", alice, cpu=4)
    job = lifecycle.submit(alice, job_text("j"), virtual_cluster="research")
    job.reason, job.queue_position = "waiting for 4 CPU in 'research': 0 free, no job ahead", 1
    job.save()
    client.force_login(alice)
    assert "waiting for 4 CPU" in client.get("/jobs/").content.decode()
    status = client.get("/api/v2/jobs/alice~j").json()["jobStatus"]
    assert status["waitingReason"].startswith("waiting for 4 CPU") and status["queuePosition"] == 1
    assert "Position 1 in the queue" in client.get("/jobs/alice~j/live/").content.decode()
