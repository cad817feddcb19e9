"""``API_ANONYMOUS_JOB_STATUS``: openpaisdk reads its job list and a job's status without a
token. Off (the default) every read needs one; on, an anonymous read of the list or a job
answers the status summary any signed-in user sees of another user's job, and nothing more."""

from __future__ import annotations

import pytest

from clusters.models import VirtualCluster
from jobs.models import Job
from tests.api.helpers import client_for, job_with_tasks

pytestmark = pytest.mark.django_db

DETAIL = "/api/v2/jobs/alice~hello"
# openpaisdk's own calls (ClusterClient.rest_api_jobs): no Authorization header.
SDK_LIST = "/rest-server/api/v1/user/alice/jobs"
SDK_DETAIL = "/rest-server/api/v1/user/alice/jobs/hello"


@pytest.fixture
def anonymous_status(settings):
    settings.API_ANONYMOUS_JOB_STATUS = True


@pytest.mark.parametrize("path", ["/api/v2/jobs", DETAIL, SDK_LIST, SDK_DETAIL])
def test_an_anonymous_read_needs_a_token_by_default(alice, path):
    job_with_tasks(alice)
    assert client_for(None).get(path).status_code == 401


def test_with_the_setting_openpaisdk_lists_jobs_without_a_token(alice, anonymous_status):
    job_with_tasks(alice)
    (listed,) = client_for(None).get(SDK_LIST).json()
    assert (listed["name"], listed["state"]) == ("hello", "WAITING")
    assert [j["name"] for j in client_for(None).get("/api/v2/jobs").json()] == ["hello"]


def test_with_the_setting_an_anonymous_read_gets_the_status_summary_only(alice, anonymous_status):
    job_with_tasks(alice)
    response = client_for(None).get(SDK_DETAIL)
    assert response.status_code == 200
    body = response.json()
    assert body["jobStatus"]["username"] == "alice"
    (task,) = body["taskRoles"]["main"]["taskStatuses"]
    assert task["taskState"] == "RUNNING"
    assert (task["containerIp"], task["containerPorts"], task["containerLog"]) == (None, {}, "")
    assert "10.0.0.5" not in response.content.decode()


@pytest.mark.parametrize(
    "path", ["config", "ssh", "events", "job-attempts", "attempts/0/tasks/main-0/logs/stdout"]
)
def test_with_the_setting_config_ssh_events_and_logs_still_need_a_token(
    alice, anonymous_status, path
):
    job_with_tasks(alice)
    assert client_for(None).get(f"{DETAIL}/{path}").status_code == 401
    assert client_for(None).get(f"{SDK_DETAIL}/config").status_code == 401


def test_with_the_setting_changes_still_need_a_token(alice, anonymous_status):
    job_with_tasks(alice)
    anonymous = client_for(None)
    assert anonymous.post("/api/v2/jobs", "name: x", content_type="text/yaml").status_code == 401
    stop = anonymous.put(f"{DETAIL}/executionType", {"value": "STOP"}, format="json")
    assert stop.status_code == 401
    assert Job.objects.get().state == "WAITING"


def test_with_the_setting_a_job_of_a_private_virtual_cluster_stays_hidden(alice, anonymous_status):
    job = job_with_tasks(alice)
    Job.objects.filter(pk=job.pk).update(virtual_cluster=VirtualCluster.objects.create(name="p"))
    assert client_for(None).get(DETAIL).status_code == 404
    assert client_for(None).get("/api/v2/jobs").json() == []


def test_jobs_private_wins_over_the_setting(alice, anonymous_status, settings):
    settings.JOBS_PRIVATE = True
    job_with_tasks(alice)
    assert client_for(None).get(DETAIL).status_code == 404
    assert client_for(None).get("/api/v2/jobs").json() == []
