"""OpenPAI's job-attempts operations: getJobAttemptsHealthz, and getJobAttempt of a job that
still waits (OpenPAI answers its latest state as the attempt about to start)."""

from __future__ import annotations

import pytest

from jobs import lifecycle
from jobs.models import Job, JobAttempt
from tests.api.helpers import client_for, job_with_tasks
from tests.jobs.samples import hello_job

pytestmark = pytest.mark.django_db

ATTEMPTS = "/api/v2/jobs/alice~hello/job-attempts"


def test_getJobAttemptsHealthz_answers_200_without_a_token(alice):
    job_with_tasks(alice)
    response = client_for(None).get(f"{ATTEMPTS}/healthz")
    assert response.status_code == 200
    assert response.json() == {"isHealthy": True, "message": "ok"}


def waiting_job(owner) -> Job:
    job = lifecycle.submit(owner, hello_job("hello"))
    Job.objects.filter(pk=job.pk).update(state="WAITING", reason="waiting for 1 GPU")
    return job


def test_getJobAttempt_of_a_waiting_job_is_its_latest_state(alice):
    waiting_job(alice)
    response = client_for(alice).get(f"{ATTEMPTS}/0")
    assert response.status_code == 200
    body = response.json()
    assert (body["state"], body["attemptIndex"], body["isLatest"]) == ("WAITING", 0, True)
    assert body["attemptStartedTime"] is None and body["appExitDiagnostics"] == "waiting for 1 GPU"
    assert body["taskRoles"]["main"]["taskStatuses"] == []
    assert client_for(alice).get(f"{ATTEMPTS}/1").status_code == 404


def test_getJobAttempts_of_a_waiting_job_lists_the_pending_attempt(alice):
    waiting_job(alice)
    body = client_for(alice).get(ATTEMPTS).json()
    assert [(a["attemptIndex"], a["state"], a["isLatest"]) for a in body] == [(0, "WAITING", True)]


def test_a_job_waiting_for_its_retry_lists_the_old_attempt_and_the_pending_one(alice):
    job = waiting_job(alice)
    JobAttempt.objects.create(job=job, number=0, key=f"k-{job.id}", state="FAILED")
    body = client_for(alice).get(ATTEMPTS).json()
    assert [(a["attemptIndex"], a["isLatest"]) for a in body] == [(0, False), (1, True)]
    assert client_for(alice).get(f"{ATTEMPTS}/1").json()["state"] == "WAITING"


def test_the_job_detail_at_attempt_0_of_a_waiting_job_answers_200(alice):
    waiting_job(alice)
    response = client_for(alice).get("/api/v2/jobs/alice~hello/attempts/0")
    assert response.status_code == 200
    assert response.json()["jobStatus"]["state"] == "WAITING"
    assert client_for(alice).get("/api/v2/jobs/alice~hello/attempts/1").status_code == 404


def test_a_running_job_has_no_pending_attempt(alice):
    job_with_tasks(alice)
    Job.objects.filter(name="hello").update(state="RUNNING")
    assert client_for(alice).get(f"{ATTEMPTS}/1").status_code == 404
    assert [a["attemptIndex"] for a in client_for(alice).get(ATTEMPTS).json()] == [0]
