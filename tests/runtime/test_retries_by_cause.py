"""OpenPAI's retry counts by cause, from real retried tasks and attempts: per task
``retries`` and ``accountableRetries`` (a retry after a transient failure, such as SIGKILL,
is not accountable), and a preemption's restart counted in the job's ``retries`` without
using up ``jobRetryCount``."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from django.utils import timezone

from jobs import lifecycle
from jobs.lifecycle.retry import retry_job
from jobs.models import Job, JobAttempt
from jobs.states import JobState
from tests.jobs.helpers import settle
from tests.runtime.jobs import api_of

pytestmark = pytest.mark.django_db(transaction=True)


def thrice(name: str, marker: Path, job_retries: int = 0) -> str:
    """A task killed by SIGKILL, then failing with exit 1, then succeeding."""
    return textwrap.dedent(f"""\
        protocolVersion: 2
        name: {name}
        type: job
        jobRetryCount: {job_retries}
        prerequisites: [{{name: img, type: dockerimage, uri: python}}]
        taskRoles:
          main:
            taskRetryCount: 2
            dockerImage: img
            resourcePerInstance: {{cpu: 1, memoryMB: 128, gpu: 0}}
            commands:
              - if [ -f "{marker}.2" ]; then echo third run; exit 0; fi
              - if [ -f "{marker}.1" ]; then touch "{marker}.2"; exit 1; fi
              - touch "{marker}.1"
              - kill -9 $$
        """)


def test_a_retry_after_sigkill_is_not_accountable_one_after_exit_1_is(alice, backend, shared):
    job = settle(backend, lifecycle.submit(alice, thrice("thrice", shared / "m")))
    assert job.state == JobState.SUCCEEDED
    status = api_of(alice, job)["taskRoles"]["main"]["taskStatuses"][0]
    # OpenPAI: SIGKILL (137) is a TRANSIENT platform failure, exit 1 (255) is not.
    assert (status["retries"], status["accountableRetries"]) == (2, 1)


def preempted_then_failed(alice, job_retries: int) -> tuple[Job, JobAttempt]:
    """A running job whose attempt 0 was preempted and whose attempt 1 has just failed."""
    job = lifecycle.submit(alice, thrice("preempted", Path("/nonexistent/m"), job_retries))
    now = timezone.now()
    JobAttempt.objects.create(job=job, number=0, key=f"k-{job.id}-0", state="STOPPED")
    failed = JobAttempt.objects.create(
        job=job, number=1, key=f"k-{job.id}-1", state="FAILED", completed_at=now
    )
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, retries=1)
    job.refresh_from_db()
    return job, failed


def test_a_preemption_uses_up_no_job_retry(alice, backend):
    job, failed = preempted_then_failed(alice, job_retries=1)
    assert retry_job(job, failed, backend)
    job.refresh_from_db()
    assert job.retries == 2
    assert JobAttempt.objects.filter(job=job, number=2).exists()
    details = api_of(alice, job)["jobStatus"]["retryDetails"]
    assert details == {"user": 1, "platform": 0, "resource": 1}


def test_a_failure_after_a_preemption_without_job_retries_ends_the_job(alice, backend):
    job, failed = preempted_then_failed(alice, job_retries=0)
    assert not retry_job(job, failed, backend)
