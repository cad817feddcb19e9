"""Shared by the API tests: clients for the personas and a job with a hand-made attempt."""

from __future__ import annotations

from typing import Any

from rest_framework.test import APIClient

from jobs import lifecycle
from jobs.models import Job, JobAttempt, Task
from tests.jobs.samples import hello_job


def client_for(user: Any | None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def job_with_tasks(owner: Any, name: str = "hello", ssh_port: int | None = 22022) -> Job:
    """A submitted job whose attempt 0 has a running task ``main-0`` on 10.0.0.5."""
    job = lifecycle.submit(owner, hello_job(name))
    attempt = JobAttempt.objects.create(job=job, number=0, key=f"k-{job.id}")
    ports: dict[str, list[int]] = {"http": [8080]}
    if ssh_port is not None:
        ports["ssh"] = [ssh_port]
    Task.objects.create(
        attempt=attempt, role="main", index=0, state="RUNNING", ip="10.0.0.5", ports=ports
    )
    return job
