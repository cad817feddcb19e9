"""OpenPAI's updateVirtualClusterStatus: ``PUT /api/v2/virtual-clusters/<vc>/status`` with
``{"vcStatus": "stopped" | "running"}`` (admin); a stopped virtual cluster admits no new job."""

from __future__ import annotations

import pytest

from clusters.models import VirtualCluster
from jobs.models import Job
from tests.api.helpers import client_for
from tests.jobs.samples import hello_job

pytestmark = pytest.mark.django_db

STATUS = "/api/v2/virtual-clusters/research/status"


@pytest.fixture
def research(db) -> VirtualCluster:
    return VirtualCluster.objects.create(name="research", open_to_all=True)


def submit(user, name: str = "hello"):
    return client_for(user).post(
        "/api/v2/jobs?virtualCluster=research", hello_job(name), content_type="text/yaml"
    )


def test_updateVirtualClusterStatus_stopped_refuses_new_jobs(research, admin, alice):
    response = client_for(admin).put(STATUS, {"vcStatus": "stopped"}, format="json")
    assert (response.status_code, response.json()) == (
        201,
        {"message": "stop vc research successfully"},
    )
    assert client_for(alice).get("/api/v2/virtual-clusters/research").json()["status"] == "STOPPED"
    refused = submit(alice)
    assert refused.status_code == 400
    assert "defaults.virtualCluster" in refused.json()["message"]
    assert "stopped" in refused.json()["message"]
    assert not Job.objects.exists()


def test_updateVirtualClusterStatus_running_admits_jobs_again(research, admin, alice):
    client_for(admin).put(STATUS, {"vcStatus": "stopped"}, format="json")
    response = client_for(admin).put(STATUS, {"vcStatus": "running"}, format="json")
    assert response.json() == {"message": "active vc research successfully"}
    assert submit(alice).status_code == 202
    assert Job.objects.get().virtual_cluster == research


def test_a_stopped_virtual_cluster_keeps_the_jobs_it_holds(research, admin, alice):
    assert submit(alice).status_code == 202
    client_for(admin).put(STATUS, {"vcStatus": "stopped"}, format="json")
    assert Job.objects.get().state not in ("STOPPED", "STOPPING")


@pytest.mark.parametrize(
    ("body", "code", "error"),
    [
        ({"vcStatus": "paused"}, 400, "BadConfigurationError"),
        ({}, 400, "BadConfigurationError"),
    ],
)
def test_updateVirtualClusterStatus_names_a_bad_status(research, admin, body, code, error):
    response = client_for(admin).put(STATUS, body, format="json")
    assert (response.status_code, response.json()["code"]) == (code, error)
    assert "vcStatus" in response.json()["message"]


def test_updateVirtualClusterStatus_is_for_admins(research, alice):
    response = client_for(alice).put(STATUS, {"vcStatus": "stopped"}, format="json")
    assert (response.status_code, response.json()["code"]) == (403, "ForbiddenUserError")
    assert not VirtualCluster.objects.get(name="research").stopped


def test_updateVirtualClusterStatus_of_an_unknown_vc_is_404(admin):
    response = client_for(admin).put(
        "/api/v2/virtual-clusters/novc/status", {"vcStatus": "stopped"}, format="json"
    )
    assert (response.status_code, response.json()["code"]) == (404, "NoVirtualClusterError")
