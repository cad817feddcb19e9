"""OpenPAI's ``jobStatus.retryDetails``: each job retry counted by what caused it, from the
OpenPAI exit type of the task that ended the retried attempt (k8s.js ``retryDetails``:
``user`` the accountable retries, ``platform`` the rest, ``resource``)."""

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


def fail_attempt(job: Job, number: int, exit_code: int, log: str = "") -> None:
    """Attempt ``number`` of ``job`` ended: its task ``main-0`` failed as ``log`` says."""
    spec = exitspec.explain(exit_code, "", log)
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


def retried(job: Job, *failures: tuple[int, str]) -> dict[str, int]:
    """The ``retryDetails`` of ``job`` after one retry per failure, the last attempt running."""
    for number, (code, log) in enumerate(failures):
        fail_attempt(job, number, code, log)
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


@pytest.mark.parametrize(
    ("openpai_type", "kind"),
    [
        ("PLATFORM_FAILURE", "platform"),
        ("RESOURCE_ALLOCATION_TIMEOUT", "resource"),
        ("USER_FAILURE", "user"),
        ("UNKNOWN_FAILURE", "user"),
    ],
)
def test_retry_kind_follows_openpais_exit_type(openpai_type, kind):
    assert exitspec.retry_kind(openpai_type) == kind


def test_the_job_list_carries_each_jobs_retryDetails(alice):
    job = job_with_tasks(alice)
    job_with_tasks(alice, "other")
    retried(job, (1, PORT_CONFLICT_LOG), (1, IMPORT_ERROR_LOG))
    listed = {j["name"]: j["retryDetails"] for j in client_for(alice).get("/api/v2/jobs").json()}
    assert listed == {
        "hello": {"user": 1, "platform": 1, "resource": 0},
        "other": {"user": 0, "platform": 0, "resource": 0},
    }
