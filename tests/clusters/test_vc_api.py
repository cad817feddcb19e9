"""GET /api/v2/virtual-clusters in OpenPAI's shape; PUT and DELETE for admins only."""

from __future__ import annotations

import pytest
from django.db.models import ProtectedError
from django.test import Client
from rest_framework.test import APIClient

from clusters import capacity
from clusters.models import VirtualCluster
from jobs import lifecycle
from tests.clusters.helpers import cluster, job_text, vc

pytestmark = pytest.mark.django_db


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_the_list_has_used_guaranteed_and_total_resources(alice):
    cluster(cpu=8, gpus={"V100": 4})
    vc("research", alice, cpu=4, memory_mb=8000, gpus={"V100": 2})
    body = client_for(alice).get("/api/v2/virtual-clusters").json()
    assert set(body) == {"default", "research"}
    research = body["research"]
    assert research["resourcesGuaranteed"] == {
        "cpu": 4,
        "memory": 8000,
        "gpu": 2,
        "vCores": 4,
        "GPUs": 2,
        "gpuTypes": {"V100": 2},
    }
    assert research["resourcesTotal"]["vCores"] == 8 and research["resourcesTotal"]["gpuTypes"] == {
        "V100": 4
    }
    assert research["resourcesUsed"] == {
        "cpu": 0,
        "memory": 0,
        "gpu": 0,
        "vCores": 0,
        "GPUs": 0,
        "gpuTypes": {},
    }


def test_one_virtual_cluster_counts_its_waiting_jobs(alice):
    vc("research", alice, cpu=4)
    lifecycle.submit(alice, job_text("j"), virtual_cluster="research")
    body = client_for(alice).get("/api/v2/virtual-clusters/research").json()
    assert body["numPendingJobs"] == 1 and body["numJobs"] == 1


def test_an_unknown_virtual_cluster_is_404_with_code_and_message(alice):
    response = client_for(alice).get("/api/v2/virtual-clusters/nope")
    assert response.status_code == 404
    assert response.json()["code"] == "NoVirtualClusterError"


def test_a_private_virtual_cluster_is_404_and_unlisted_to_a_non_member(alice, bob, admin):
    vc("research", alice, cpu=4)
    response = client_for(bob).get("/api/v2/virtual-clusters/research")
    assert response.status_code == 404
    assert response.json()["code"] == "NoVirtualClusterError"
    assert set(client_for(bob).get("/api/v2/virtual-clusters").json()) == {"default"}
    for user in (alice, admin):
        assert client_for(user).get("/api/v2/virtual-clusters/research").status_code == 200
        assert "research" in client_for(user).get("/api/v2/virtual-clusters").json()


def test_anonymous_callers_are_refused():
    assert APIClient().get("/api/v2/virtual-clusters").status_code in (401, 403)


def test_only_an_admin_may_put_or_delete(bob):
    vc("research", cpu=1)
    client = client_for(bob)
    put = client.put("/api/v2/virtual-clusters/research", {"description": "x"}, format="json")
    assert put.status_code == 403 and put.json()["code"] == "ForbiddenUserError"
    assert client.delete("/api/v2/virtual-clusters/research").status_code == 403


def test_an_admin_creates_and_edits_a_virtual_cluster(admin):
    cluster(cpu=8, gpus={"V100": 4})
    client = client_for(admin)
    body = {
        "description": "team",
        "resourcesGuaranteed": {"vCores": 2, "memory": 1000, "gpuTypes": {"V100": 2}},
    }
    created = client.put("/api/v2/virtual-clusters/research", body, format="json")
    assert created.status_code == 201
    assert created.json()["resourcesGuaranteed"]["GPUs"] == 2
    changed = client.put("/api/v2/virtual-clusters/research", {"strictFifo": True}, format="json")
    assert changed.status_code == 200 and changed.json()["strictFifo"] is True


def test_guarantees_beyond_capacity_are_refused_saying_by_how_much(admin):
    cluster(cpu=8, gpus={"V100": 4})
    vc("other", cpu=6, gpus={"V100": 3})
    body = {"resourcesGuaranteed": {"vCores": 4, "gpuTypes": {"V100": 2}}}
    response = client_for(admin).put("/api/v2/virtual-clusters/research", body, format="json")
    assert response.status_code == 400
    message = response.json()["message"]
    assert "cpu: guaranteed quotas would sum to 10, 2 more than the cluster's 8" in message
    assert "gpus.V100: guaranteed quotas would sum to 5, 1 more than the cluster's 4" in message


def test_bad_quota_values_are_400(admin):
    body = {"resourcesGuaranteed": {"vCores": -1}}
    response = client_for(admin).put("/api/v2/virtual-clusters/research", body, format="json")
    assert response.status_code == 400 and "vCores" in response.json()["message"]


def test_a_virtual_cluster_with_live_jobs_cannot_be_deleted(admin, alice):
    vc("research", alice, cpu=4)
    job = lifecycle.submit(alice, job_text("j"), virtual_cluster="research")
    client = client_for(admin)
    response = client.delete("/api/v2/virtual-clusters/research")
    assert response.status_code == 409 and "1 live jobs" in response.json()["message"]
    lifecycle.stop(job, admin)
    assert client.delete("/api/v2/virtual-clusters/research").status_code == 200
    job.refresh_from_db()
    assert job.virtual_cluster.name == "default"


def test_the_default_holding_finished_jobs_is_not_deleted_even_through_the_orm(admin, alice):
    job = lifecycle.submit(alice, job_text("j"))
    lifecycle.stop(job, admin)  # a waiting job stops at once: finished
    with pytest.raises(ProtectedError):
        VirtualCluster.objects.filter(name="default").delete()
    job.refresh_from_db()
    assert job.virtual_cluster.name == "default"


def test_default_cannot_be_deleted(admin):
    assert client_for(admin).delete("/api/v2/virtual-clusters/default").status_code == 409


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"strictFifo": "false"}, "strictFifo"),
        ({"strictFifo": 0}, "strictFifo"),
        ({"openToAll": "yes"}, "openToAll"),
        ({"description": 5}, "description"),
        ({"resourcesGuaranteed": {"vCores": "4"}}, "resourcesGuaranteed.vCores"),
        ({"resourcesGuaranteed": {"vCores": 2.5}}, "resourcesGuaranteed.vCores"),
        ({"resourcesGuaranteed": {"memory": True}}, "resourcesGuaranteed.memory"),
        ({"resourcesGuaranteed": {"memory": 2**40}}, "resourcesGuaranteed.memory"),
        ({"resourcesGuaranteed": {"gpuTypes": ["V100"]}}, "resourcesGuaranteed.gpuTypes"),
        ({"resourcesGuaranteed": {"gpuTypes": {"V100": -1}}}, "resourcesGuaranteed.gpuTypes.V100"),
        (
            {"resourcesGuaranteed": {"gpuTypes": {"V100": None}}},
            "resourcesGuaranteed.gpuTypes.V100",
        ),
        ({"resourcesGuaranteed": {"gpuTypes": {"": 1}}}, "resourcesGuaranteed.gpuTypes"),
        ({"resourcesGuaranteed": {"gpuTypes": {"K80": 1}}}, "gpus.K80"),
        ({"resourcesGuaranteed": "all"}, "resourcesGuaranteed"),
    ],
)
def test_a_put_with_a_field_of_the_wrong_kind_is_400_naming_it_and_changes_nothing(
    admin, body, field
):
    cluster(cpu=8, gpus={"V100": 4})
    vc("research", cpu=2, gpus={"V100": 1})
    response = client_for(admin).put("/api/v2/virtual-clusters/research", body, format="json")
    assert response.status_code == 400
    assert response.json()["message"].startswith(f"{field}:")
    research = VirtualCluster.objects.get(name="research")
    assert (research.strict_fifo, research.open_to_all, research.cpu) == (False, False, 2)


def test_a_put_body_that_is_not_an_object_is_400(admin):
    response = client_for(admin).put("/api/v2/virtual-clusters/research", [1], format="json")
    assert response.status_code == 400 and response.json()["message"].startswith("body:")


def test_strict_fifo_can_be_turned_off_again(admin):
    vc("research", cpu=1, strict_fifo=True)
    client = client_for(admin)
    response = client.put("/api/v2/virtual-clusters/research", {"strictFifo": False}, format="json")
    assert response.status_code == 200 and response.json()["strictFifo"] is False


def test_a_put_ignores_the_counts_a_get_returns(admin):
    cluster(cpu=8)
    vc("research", cpu=2)
    client = client_for(admin)
    body = client.get("/api/v2/virtual-clusters/research").json() | {"description": "team"}
    response = client.put("/api/v2/virtual-clusters/research", body, format="json")
    assert response.status_code == 200 and response.json()["description"] == "team"


def test_with_no_node_cached_guarantees_are_checked_against_the_backends_capacity(admin, backend):
    cpus = sum(node.cpu for node in capacity.backend_nodes(backend).values())
    body = {"resourcesGuaranteed": {"vCores": cpus + 1}}
    response = client_for(admin).put("/api/v2/virtual-clusters/research", body, format="json")
    assert response.status_code == 400
    assert f"1 more than the cluster's {cpus}" in response.json()["message"]
    assert not VirtualCluster.objects.filter(name="research").exists()


def test_a_put_counts_the_virtual_clusters_own_quota_once(admin):
    cluster(cpu=8)
    vc("research", cpu=6)
    body = {"resourcesGuaranteed": {"vCores": 7}}
    response = client_for(admin).put("/api/v2/virtual-clusters/research", body, format="json")
    assert response.status_code == 200 and response.json()["quota"]["vCores"] == 7


def test_vcs_whose_guarantee_a_shrunk_cluster_cannot_give_are_named(alice, admin):
    node = cluster(cpu=8, gpus={"V100": 4})
    vc("research", alice, cpu=4, gpus={"V100": 3})
    vc("vision", alice, cpu=2, gpus={"V100": 1})
    body = client_for(alice).get("/api/v2/virtual-clusters").json()
    assert [body[n]["guaranteeUnmet"] for n in ("research", "vision", "default")] == [[], [], []]
    node.gpus = {"V100": 2}  # a GPU board lost
    node.save()
    body = client_for(alice).get("/api/v2/virtual-clusters").json()
    said = "can no longer be met: the virtual clusters guarantee 4 in all and the cluster has 2"
    assert body["research"]["guaranteeUnmet"] == [f"its guarantee of 3 GPU (V100) {said}"]
    assert body["vision"]["guaranteeUnmet"] == [f"its guarantee of 1 GPU (V100) {said}"]
    assert body["default"]["guaranteeUnmet"] == []  # it guarantees only what no VC does
    client = Client()
    client.force_login(admin)
    page = client.get("/manage/virtual-clusters/").content.decode()
    assert f'id="unmet-research">research: its guarantee of 3 GPU (V100) {said}' in page
