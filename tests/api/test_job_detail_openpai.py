"""OpenPAI's job detail, attempts, events and SSH shapes, field by field (getJob,
getJobAttempts, getJobEvents, getJobSshInfo)."""

from __future__ import annotations

from unittest import mock

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs import exitspec, lifecycle
from jobs.access import job_view_for
from jobs.models import Job, JobAttempt, Task
from jobs.plugins.ssh.keys import job_keys
from tests.api.helpers import client_for, job_with_tasks
from tests.jobs.samples import hello_job

pytestmark = pytest.mark.django_db

URL = "/api/v2/jobs/alice~hello"


def failed_job(owner, name: str = "hello") -> Job:
    """A job whose one task failed with a Python ImportError quoted from its log."""
    job = job_with_tasks(owner, name)
    log = (
        "Traceback (most recent call last):\n  File t.py\nModuleNotFoundError: No module named x\n"
    )
    spec = exitspec.explain(1, "", log)
    assert spec is not None
    now = timezone.now()
    Task.objects.filter(attempt__job=job).update(
        state="FAILED", exit_code=1, exit_spec=spec.as_dict(), completed_at=now, node="node-7"
    )
    JobAttempt.objects.filter(job=job).update(state="FAILED", exit_code=1, completed_at=now)
    Job.objects.filter(pk=job.pk).update(
        state="FAILED", exit_code=1, reason=spec.reason, completed_at=now
    )
    return Job.objects.get(pk=job.pk)


def test_getJob_has_every_jobStatus_field_of_openpai(alice):
    job = job_with_tasks(alice)
    status = client_for(alice).get(URL).json()["jobStatus"]
    for field in (
        "username", "state", "subState", "executionType", "retries", "retryDetails",
        "retryDelayTime", "createdTime", "completedTime", "appId", "appProgress",
        "appTrackingUrl", "appLaunchedTime", "appCompletedTime", "appExitCode", "appExitSpec",
        "appExitDiagnostics", "appExitMessages", "appExitTriggerMessage",
        "appExitTriggerTaskRoleName", "appExitTriggerTaskIndex", "appExitType",
        "virtualCluster", "appCreatedTime", "submissionTime", "attemptState", "jobPriority",
        "totalTaskRoleNumber", "totalTaskNumber", "totalGpuNumber",
    ):  # fmt: skip
        assert field in status, field
    assert status["submissionTime"] == int(job.created_at.timestamp() * 1000)
    assert status["retryDetails"] == {"user": 0, "platform": 0, "resource": 0}
    assert status["attemptState"] == "RUNNING"
    assert status["appId"] == f"k-{job.id}"
    assert status["appCreatedTime"] is not None
    assert status["totalTaskRoleNumber"] == 1
    assert status["jobPriority"] == "default"


def test_getJob_has_debugId(alice):
    job = job_with_tasks(alice)
    assert client_for(alice).get(URL).json()["debugId"] == f"k-{job.id}"


def test_jobPriority_names_the_hived_priority_class(alice):
    job = job_with_tasks(alice)
    Job.objects.filter(pk=job.pk).update(priority=100)
    assert client_for(alice).get(URL).json()["jobStatus"]["jobPriority"] == "prod"


def test_each_task_has_taskUid_containerLog_and_containerGpus(alice):
    job_with_tasks(alice)
    Task.objects.update(backend_ref="proc-1")
    (task,) = client_for(alice).get(URL).json()["taskRoles"]["main"]["taskStatuses"]
    assert len(task["taskUid"]) == 36
    assert task["containerGpus"] == "0"  # no GPU: no bit set
    assert task["containerLog"].startswith("http://testserver/api/v2/jobs/alice~hello/")
    assert task["containerLog"].endswith("/tasks/main-0/logs/stdout")
    again = client_for(alice).get(URL).json()["taskRoles"]["main"]["taskStatuses"][0]
    assert again["taskUid"] == task["taskUid"]


def test_a_failed_job_names_the_trigger_and_its_exit_messages(alice):
    failed_job(alice)
    status = client_for(alice).get(URL).json()["jobStatus"]
    assert status["appExitTriggerTaskRoleName"] == "main"
    assert status["appExitTriggerTaskIndex"] == 0
    assert status["appExitType"] == "USER_FAILURE"
    assert status["appExitMessages"]["runtime"]["originUserExitCode"] == 1
    assert "ModuleNotFoundError" in status["appExitMessages"]["runtime"]["errorLogs"]["user"]
    assert status["appExitSpec"]["code"] == 232  # OpenPAI's ContainerImportError
    assert status["appExitSpec"]["openpaiPhrase"] == "ContainerImportError"
    assert status["appExitSpec"]["phrase"] == "Python exception ModuleNotFoundError"
    assert status["appProgress"] == 1


def test_getJobAttempt_carries_exitType_and_the_trigger(alice):
    failed_job(alice)
    attempt = client_for(alice).get(f"{URL}/job-attempts/0").json()
    assert (attempt["exitType"], attempt["appExitTriggerTaskRoleName"]) == ("USER_FAILURE", "main")
    assert attempt["exitPhrase"] == "Python exception ModuleNotFoundError"


def test_getJobEvents_answers_totalCount_and_data(alice):
    job_with_tasks(alice)
    body = client_for(alice).get(f"{URL}/events").json()
    assert body["totalCount"] == len(body["data"]) >= 1
    first = body["data"][0]
    assert first["reason"] == "submitted" and first["type"] == "Normal"
    assert first["frameworkName"] == "alice~hello"
    assert {"uid", "firstTimestamp", "lastTimestamp", "count"} <= set(first)


def test_getJobEvents_keeps_one_type_and_refuses_another(alice):
    job_with_tasks(alice)
    client = client_for(alice)
    assert client.get(f"{URL}/events?type=Warning").json()["totalCount"] == 0
    refused = client.get(f"{URL}/events?type=Fatal")
    assert refused.status_code == 400
    assert "type" in refused.json()["message"]


def test_getJobSshInfo_lists_containers_and_keyPair(alice):
    job = job_with_tasks(alice)
    job_keys(job)
    body = client_for(alice).get(f"{URL}/ssh").json()
    assert body["containers"] == [{"id": "main-0", "sshIp": "10.0.0.5", "sshPort": "22022"}]
    pair = body["keyPair"]
    assert pair["privateKeyFileName"] == "hello.id_ed25519"
    assert pair["publicKeyFileName"] == "hello.id_ed25519.pub"
    assert pair["privateKeyDirectDownloadLink"].endswith("/jobs/alice~hello/ssh-key/")
    assert "PRIVATE KEY" not in str(body)


def test_the_keyPair_download_link_is_the_owners_only(alice, admin):
    job_keys(job_with_tasks(alice))
    body = client_for(admin).get(f"{URL}/ssh").json()
    assert body["keyPair"]["privateKeyDirectDownloadLink"] is None
    assert body["containers"][0]["sshIp"] == "10.0.0.5"


def test_virtual_cluster_resources_carry_cpu_memory_gpu(alice):
    body = client_for(alice).get("/api/v2/virtual-clusters/default").json()
    for key in ("resourcesUsed", "resourcesTotal", "resourcesGuaranteed"):
        assert {"cpu", "memory", "gpu", "vCores", "GPUs"} <= set(body[key])
        assert body[key]["cpu"] == body[key]["vCores"]


def attempt_reads(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries if "jobs_jobattempt" in q["sql"] or "jobs_task" in q["sql"]]


def test_polling_a_job_that_runs_costs_one_query(admin, alice):
    """A client polling a running job reads the job, its latest attempt and that attempt's
    tasks in one query; a user who is not an admin first reads which virtual clusters they may
    list jobs of."""
    job_with_tasks(admin, "mine")
    with CaptureQueriesContext(connection) as queries:
        status = client_for(admin).get("/api/v2/jobs/admin~mine").json()
    assert len(queries) == 1, [q["sql"] for q in queries]
    assert status["jobStatus"]["attemptState"] == "RUNNING"
    assert status["taskRoles"]["main"]["taskStatuses"][0]["containerIp"] == "10.0.0.5"
    job_with_tasks(alice)
    with CaptureQueriesContext(connection) as queries:
        status = client_for(alice).get(URL).json()
    assert len(queries) == 2, [q["sql"] for q in queries]
    assert status["jobStatus"]["username"] == "alice"


def test_getJob_reads_the_latest_attempt_with_its_tasks_in_one_query(alice):
    """What a client polling a job's status costs the portal: one query for its latest
    attempt and that attempt's tasks (a second only for a job with no attempt yet), whatever
    its number of attempts."""
    job = job_with_tasks(alice)
    JobAttempt.objects.filter(job=job).update(state="FAILED")
    second = JobAttempt.objects.create(job=job, number=1, key=f"k-{job.id}-1")
    Task.objects.create(attempt=second, role="main", index=0, state="RUNNING", ip="10.0.0.6")
    client = client_for(alice)
    with CaptureQueriesContext(connection) as queries:
        status = client.get(URL).json()
    assert len(attempt_reads(queries)) == 1, attempt_reads(queries)
    assert (status["jobStatus"]["attemptId"], status["jobStatus"]["attemptState"]) == (1, "RUNNING")
    (task,) = status["taskRoles"]["main"]["taskStatuses"]
    assert task["containerIp"] == "10.0.0.6"
    waiting = lifecycle.submit(alice, hello_job("waiting"))
    with CaptureQueriesContext(connection) as queries:
        status = client.get(f"/api/v2/jobs/alice~{waiting.name}").json()
    assert len(attempt_reads(queries)) == 2
    assert status["jobStatus"]["attemptId"] is None
    assert status["taskRoles"]["main"]["taskStatuses"] == []


def test_a_job_that_starts_between_the_polls_reads_is_shown_with_its_tasks(alice):
    """The scheduler starts the job after the poll found no task and before it reads the job
    again: the job is shown RUNNING with its attempt's tasks, never RUNNING with none."""
    waiting = lifecycle.submit(alice, hello_job())

    def start_then_read(*args):
        attempt = JobAttempt.objects.create(job=waiting, number=0, key="k", state="RUNNING")
        Task.objects.create(attempt=attempt, role="main", index=0, state="RUNNING", ip="10.0.0.7")
        Job.objects.filter(pk=waiting.pk).update(state="RUNNING")
        return job_view_for(*args)

    with mock.patch("jobs.api.views.job_view_for", start_then_read):
        status = client_for(alice).get(URL).json()
    assert status["jobStatus"]["state"] == "RUNNING"
    (task,) = status["taskRoles"]["main"]["taskStatuses"]
    assert task["containerIp"] == "10.0.0.7"
