"""OpenPAI's ``jobStatus.retryDetails``: each job retry counted by what caused it, from
OpenPAI's exit spec entry of the task that ended the retried attempt (k8s.js
``retryDetails``: ``user`` the accountable retries, those after a failure whose ``behavior``
is not transient; OpenPAI's ``platform`` the rest, split here into ``resource`` when the task
lost its node or place, or the attempt was preempted, and ``platform``)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from jobs import exitspec
from jobs.models import Job, JobAttempt, Task
from tests.api.helpers import client_for, job_with_tasks

pytestmark = pytest.mark.django_db

URL = "/api/v2/jobs/alice~hello"
PORT_CONFLICT_LOG = "OSError: [Errno 98] Address already in use\n"
IMPORT_ERROR_LOG = "Traceback (most recent call last):\nModuleNotFoundError: No module named x\n"


def fail_attempt(
    job: Job, number: int, exit_code: int | None, log: str = "", diagnostics: str = ""
) -> None:
    """Attempt ``number`` of ``job`` ended: its task ``main-0`` failed as ``log`` and the
    backend's ``diagnostics`` say."""
    spec = exitspec.explain(exit_code, diagnostics, log)
    assert spec is not None
    attempt, _ = JobAttempt.objects.get_or_create(
        job=job, number=number, defaults={"key": f"k-{job.id}-{number}"}
    )
    now = timezone.now()
    Task.objects.update_or_create(
        attempt=attempt,
        role="main",
        index=0,
        defaults={
            "state": "FAILED",
            "exit_code": exit_code,
            "exit_spec": spec.as_dict(),
            "completed_at": now,
        },
    )
    JobAttempt.objects.filter(pk=attempt.pk).update(
        state="FAILED", exit_code=exit_code, completed_at=now
    )


def retried(
    job: Job, *failures: tuple[int | None, str] | tuple[int | None, str, str]
) -> dict[str, int]:
    """The ``retryDetails`` of ``job`` after one retry per failure (exit code, log and
    optionally the backend's diagnostics), the last attempt running."""
    for number, failure in enumerate(failures):
        fail_attempt(job, number, *failure)
    JobAttempt.objects.create(job=job, number=len(failures), key=f"k-{job.id}-last")
    Job.objects.filter(pk=job.pk).update(retries=len(failures))
    details: dict[str, int] = client_for(job.owner).get(URL).json()["jobStatus"]["retryDetails"]
    return details


def test_retryDetails_counts_a_retry_after_a_PLATFORM_FAILURE_as_platform(alice):
    job = job_with_tasks(alice)
    assert retried(job, (1, PORT_CONFLICT_LOG)) == {"user": 0, "platform": 1, "resource": 0}


def test_retryDetails_counts_a_retry_after_a_USER_FAILURE_as_user(alice):
    job = job_with_tasks(alice)
    assert retried(job, (1, IMPORT_ERROR_LOG)) == {"user": 1, "platform": 0, "resource": 0}


def test_retryDetails_splits_mixed_retries_and_sums_to_retries(alice):
    job = job_with_tasks(alice)
    details = retried(job, (137, ""), (1, IMPORT_ERROR_LOG), (1, PORT_CONFLICT_LOG))
    assert details == {"user": 1, "platform": 2, "resource": 0}
    assert sum(details.values()) == client_for(alice).get(URL).json()["jobStatus"]["retries"]


def test_retryDetails_counts_an_attempt_ended_without_an_explained_task_as_user(alice):
    job = job_with_tasks(alice)
    JobAttempt.objects.filter(job=job).update(state="FAILED", completed_at=timezone.now())
    JobAttempt.objects.create(job=job, number=1, key=f"k-{job.id}-1")
    Job.objects.filter(pk=job.pk).update(retries=1)
    details = client_for(alice).get(URL).json()["jobStatus"]["retryDetails"]
    assert details == {"user": 1, "platform": 0, "resource": 0}


def test_retryDetails_does_not_count_the_current_attempts_failure(alice):
    job = job_with_tasks(alice)
    fail_attempt(job, 0, 1, PORT_CONFLICT_LOG)
    details = client_for(alice).get(URL).json()["jobStatus"]["retryDetails"]
    assert details == {"user": 0, "platform": 0, "resource": 0}


def test_retryDetails_counts_a_retry_after_a_lost_task_as_resource(alice):
    job = job_with_tasks(alice)
    details = retried(job, (None, "", "the backend lost the task"), (1, IMPORT_ERROR_LOG))
    assert details == {"user": 1, "platform": 0, "resource": 1}


def test_retryDetails_counts_a_preempted_attempt_as_resource(alice):
    job = job_with_tasks(alice)
    JobAttempt.objects.filter(job=job, number=0).update(
        state="STOPPED", reason="preempted: 'b' needed its quota", completed_at=timezone.now()
    )
    JobAttempt.objects.create(job=job, number=1, key=f"k-{job.id}-1")
    Job.objects.filter(pk=job.pk).update(retries=1)
    status = client_for(alice).get(URL).json()["jobStatus"]
    assert (status["retries"], status["retryDetails"]) == (
        1,
        {"user": 0, "platform": 0, "resource": 1},
    )


# (exit code, log, the backend's diagnostics) -> OpenPAI's code, behavior and our cause.
CAUSES = {
    "unknown": ((1, "", ""), 255, "UNKNOWN", "user"),
    "import_error": ((1, IMPORT_ERROR_LOG, ""), 232, "PERMANENT", "user"),
    "port_conflict": ((1, PORT_CONFLICT_LOG, ""), 253, "TRANSIENT", "platform"),
    "sigkill": ((137, "", ""), 137, "TRANSIENT", "platform"),
    "sigterm": ((143, "", ""), 143, "TRANSIENT", "platform"),
    "lost": ((None, "", "the backend lost the task"), -1001, "TRANSIENT", "resource"),
    "evicted": (
        (None, "", "Evicted: The node was low on resource: ephemeral-storage."),
        -1000,
        "TRANSIENT",
        "resource",
    ),
    "node_lost": (
        (None, "", "NodeLost: Node n1 which was running pod p is unresponsive"),
        -1001,
        "TRANSIENT",
        "resource",
    ),
    "preempting": (
        (None, "", "Preempting: Preempted in order to admit critical pod"),
        -1003,
        "TRANSIENT",
        "resource",
    ),
    "out_of_cpu": (
        (None, "", "OutOfcpu: Node didn't have enough resource: cpu"),
        -1002,
        "TRANSIENT",
        "resource",
    ),
}


@pytest.mark.parametrize("case", CAUSES)
def test_the_retry_cause_follows_openpais_exit_behavior(case):
    (code, log, diagnostics), openpai_code, behavior, cause = CAUSES[case]
    spec = exitspec.explain(code, diagnostics, log)
    assert spec is not None
    found = exitspec.openpai_exit(spec.id, code, spec.lines)
    assert (found.code, found.behavior) == (openpai_code, behavior)
    assert exitspec.is_accountable(found) == (cause == "user")
    assert exitspec.spec_retry_cause(spec.as_dict()) == cause


def test_a_gang_allocation_timeout_is_a_resource_retry():
    found = exitspec.OpenPAIExit(
        251, "JobGangAllocationTimeout", "RESOURCE_ALLOCATION_TIMEOUT", "ALLOCATING",
        "TRANSIENT_CONFLICT", "ALWAYS_BACKOFF_RETRY",
    )  # fmt: skip
    assert not exitspec.is_accountable(found)
    assert exitspec.retry_cause(None, found) == "resource"


def test_the_job_list_carries_each_jobs_retryDetails(alice):
    job = job_with_tasks(alice)
    job_with_tasks(alice, "other")
    retried(job, (1, PORT_CONFLICT_LOG), (1, IMPORT_ERROR_LOG))
    listed = {j["name"]: j["retryDetails"] for j in client_for(alice).get("/api/v2/jobs").json()}
    assert listed == {
        "hello": {"user": 1, "platform": 1, "resource": 0},
        "other": {"user": 0, "platform": 0, "resource": 0},
    }
