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


def test_a_vc_without_a_quota_is_shown_the_shared_rest_it_is_guaranteed(client, alice):
    cluster(cpu=8, gpus={"V100": 4})
    vc("research", alice, cpu=3, gpus={"V100": 1})
    client.force_login(alice)
    page = client.get("/virtual-clusters/default/").content.decode()
    assert "0 used / 5 guaranteed, shared (what no VC guarantees) / 8 total" in page
    assert "0 used / 3 guaranteed, shared (what no VC guarantees) / 4 total" in page  # V100
    assert "no limit" not in page
    research = client.get("/virtual-clusters/research/").content.decode()
    assert "0 used / 3 guaranteed / 8 total" in research  # its own quota, not shared


def test_the_detail_shows_the_queue_in_order_and_the_members(client, alice):
    vc("research", alice, cpu=1)
    lifecycle.submit(alice, job_text("j1"), virtual_cluster="research")
    client.force_login(alice)
    page = client.get("/virtual-clusters/research/").content.decode()
    assert "alice~j1" in page and '<ul id="members"><li>alice</li>' in page
    assert '<a href="/jobs/alice~j1/">alice~j1</a>' in page  # each queued job links to its page


def test_a_private_virtual_cluster_is_404_to_a_non_member(client, alice, bob, admin):
    vc("research", alice, cpu=1, description="the research group's share")
    lifecycle.submit(alice, job_text("secret-plan"), virtual_cluster="research")
    client.force_login(bob)
    assert client.get("/virtual-clusters/research/").status_code == 404
    page = client.get("/virtual-clusters/").content.decode()
    assert 'id="vc-default"' in page
    assert "research" not in page
    for user in (alice, admin):
        client.force_login(user)
        detail = client.get("/virtual-clusters/research/")
        assert detail.status_code == 200 and "alice~secret-plan" in detail.content.decode()
        assert 'id="vc-research"' in client.get("/virtual-clusters/").content.decode()


def test_a_virtual_cluster_is_shown_to_a_member_group_and_to_all_when_open(client, bob):
    from django.contrib.auth.models import Group

    team = vc("team")
    group = Group.objects.create(name="lab")
    team.groups.add(group)
    open_vc = vc("shared", open_to_all=True)
    client.force_login(bob)
    assert client.get("/virtual-clusters/team/").status_code == 404
    bob.groups.add(group)
    assert client.get("/virtual-clusters/team/").status_code == 200
    assert client.get(f"/virtual-clusters/{open_vc.name}/").status_code == 200


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
    over = "cpu: guaranteed quotas would sum to 9, 1 more than the cluster&#x27;s 8"
    assert page.count(over) == 1
    assert 'name="cpu" value="5"' in page  # the form keeps what the admin typed


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


def edit_form(**fields: str) -> dict[str, str]:
    return {"name": "research", "description": "", "cpu": "", "memory_mb": "", "gpus": ""} | fields


def test_an_admin_edits_a_virtual_cluster_without_its_own_quota_counted_twice(client, admin):
    cluster(cpu=8)
    vc("research", cpu=4)
    vc("other", cpu=2)
    client.force_login(admin)
    response = client.post("/manage/virtual-clusters/research/", edit_form(cpu="6"))
    assert response.status_code == 302
    assert VirtualCluster.objects.get(name="research").cpu == 6


def test_an_admin_renames_a_virtual_cluster_and_its_quota_is_counted_once(client, admin):
    cluster(cpu=8)
    research = vc("research", cpu=6)
    client.force_login(admin)
    form = edit_form(name="science", cpu="6", description="renamed")
    assert client.post("/manage/virtual-clusters/research/", form).status_code == 302
    research.refresh_from_db()
    assert (research.name, research.cpu, research.description) == ("science", 6, "renamed")
    assert not VirtualCluster.objects.filter(name="research").exists()


def test_an_edit_beyond_capacity_is_refused_and_nothing_changes(client, admin):
    cluster(cpu=8)
    vc("research", cpu=4)
    vc("other", cpu=2)
    client.force_login(admin)
    page = client.post("/manage/virtual-clusters/research/", edit_form(name="r2", cpu="7"))
    assert "cpu: guaranteed quotas would sum to 9, 1 more than the cluster&#x27;s 8" in (
        page.content.decode()
    )
    assert VirtualCluster.objects.get(name="research").cpu == 4


def test_a_gpu_type_the_cluster_lacks_is_named(client, admin):
    cluster(cpu=8, gpus={"V100": 4})
    client.force_login(admin)
    page = client.post("/manage/virtual-clusters/new/", edit_form(gpus='{"K80": 1}'))
    assert "gpus.K80: the cluster has no GPU of type &#x27;K80&#x27; (it has V100)" in (
        page.content.decode()
    )
    assert not VirtualCluster.objects.filter(name="research").exists()


def test_bob_cannot_delete_a_virtual_cluster(client, bob):
    vc("research", cpu=4)
    client.force_login(bob)
    assert client.post("/manage/virtual-clusters/research/delete/").status_code == 403
    assert VirtualCluster.objects.filter(name="research").exists()


def test_an_anonymous_visitor_cannot_delete_a_virtual_cluster(client):
    vc("research", cpu=4)
    response = client.post("/manage/virtual-clusters/research/delete/")
    assert response.status_code == 302 and "/login" in response["Location"]
    assert VirtualCluster.objects.filter(name="research").exists()


def test_bob_cannot_make_himself_an_admin_or_change_alices_access(client, alice, bob):
    research = vc("research", alice, cpu=4)
    client.force_login(bob)
    for who in ("bob", "alice"):
        form = {"is_active": "on", "is_staff": "on", "virtual_clusters": [research.id]}
        assert client.post(f"/manage/users/{who}/", form).status_code == 403
    bob.refresh_from_db()
    alice.refresh_from_db()
    assert not bob.is_staff and list(bob.virtual_clusters.all()) == []
    assert alice.is_active and not alice.is_staff
    assert list(alice.virtual_clusters.all()) == [research]


def test_bob_cannot_edit_a_virtual_cluster_or_create_a_user(client, bob):
    vc("research", bob, cpu=4)
    client.force_login(bob)
    edited = client.post("/manage/virtual-clusters/research/", edit_form(cpu="1"))
    created = client.post("/manage/users/", {"username": "carol", "password": "carol-secret-pw"})
    assert (edited.status_code, created.status_code) == (403, 403)
    assert VirtualCluster.objects.get(name="research").cpu == 4
    assert not User.objects.filter(username="carol").exists()


def test_the_new_vc_form_leaves_gpus_empty_and_lists_members_as_checkboxes(client, admin, bob):
    client.force_login(admin)
    body = client.get("/manage/virtual-clusters/new/").content.decode()
    gpus = body.split('name="gpus"', 1)[1].split(">", 1)[0]
    assert "null" not in body.split('id="id_gpus"', 1)[1].split("</p>", 1)[0]
    assert 'value="' not in gpus or 'value=""' in gpus
    assert "GPUs guaranteed" in body
    assert 'type="checkbox" name="members"' in body and "bob" in body
    assert "Groups: none yet" in body


def test_a_new_vc_without_gpus_is_saved_without_a_gpu_limit(client, admin):
    client.force_login(admin)
    response = client.post("/manage/virtual-clusters/new/", {"name": "open", "gpus": ""})
    assert response.status_code == 302
    assert VirtualCluster.objects.get(name="open").gpus is None


def test_the_user_page_lists_default_once(client, admin, bob):
    vc("research", bob)
    client.force_login(admin)
    body = client.get("/manage/users/bob/").content.decode()
    select = body.split('id="id_default_vc"', 1)[1].split("</select>", 1)[0]
    assert select.count(">default<") == 1
    assert ">research<" in select


def test_creating_a_user_says_so(client, admin):
    client.force_login(admin)
    data = {"username": "carol", "password": "carol-secret-pw"}
    response = client.post("/manage/users/", data, follow=True)
    assert '<p class="flash">User carol created.' in response.content.decode()


def test_the_vc_form_lists_groups_as_checkboxes_once_there_are_some(client, admin):
    from django.contrib.auth.models import Group

    Group.objects.create(name="vision")
    client.force_login(admin)
    body = client.get("/manage/virtual-clusters/new/").content.decode()
    assert 'type="checkbox" name="groups"' in body and "vision" in body
    assert "Groups: none yet" not in body


def test_the_nodes_page_title_is_plain_text(client, admin):
    client.force_login(admin)
    page = client.get("/manage/nodes/").content.decode()
    title = page.split("<title>")[1].split("</title>")[0]
    assert title == "Nodes · GPU portal"
