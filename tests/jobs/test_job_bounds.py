"""Bounds on what one job may ask, and one job's failure in a pass fails that job alone."""

from __future__ import annotations

import resource
from contextlib import contextmanager

import pytest
from rest_framework.test import APIClient

from clusters.models import Storage
from jobs import lifecycle
from jobs.lifecycle.passes import run_pass
from jobs.models import Job, Task
from jobs.states import JobState
from tests.jobs.helpers import settle
from tests.jobs.samples import hello_job

pytestmark = pytest.mark.django_db(transaction=True)


def with_ports(name: str, ports: str) -> str:
    return hello_job(name).replace("ports: {http: 1}", f"ports: {ports}")


def submit(user, text: str):
    client = APIClient()
    client.force_authenticate(user)
    return client.generic("POST", "/api/v2/jobs", text, content_type="text/yaml")


@pytest.mark.parametrize(
    "ports, total",
    [
        ("{http: 1000000}", 1000000),
        ("{" + ", ".join(f"p{i}: 1" for i in range(20_000)) + "}", 20_000),
        ("{http: 60, ssh: 41}", 101),
    ],
)
def test_a_job_asking_too_many_ports_gets_a_400_and_the_next_runs(alice, backend, ports, total):
    response = submit(alice, with_ports("greedy", ports))
    assert response.status_code == 400
    message = response.json()["message"]
    assert f"taskRoles.main.resourcePerInstance.ports: {total} ports per task" in message
    assert "more than the limit of 100" in message
    assert not Job.objects.filter(name="greedy").exists()
    assert submit(alice, with_ports("modest", "{http: 60, ssh: 40}")).status_code == 202
    assert settle(backend, Job.objects.get(name="modest")).state == JobState.SUCCEEDED


def test_the_limit_is_a_setting(alice, settings):
    settings.JOB_MAX_PORTS_PER_TASK = 3
    response = submit(alice, with_ports("four", "{http: 4}"))
    assert response.status_code == 400
    assert "more than the limit of 3" in response.json()["message"]


def test_a_larger_job_max_bytes_admits_a_larger_job_and_names_itself(alice, settings):
    """JOB_MAX_BYTES set above 1 MiB did nothing: the protocol refused at 1 MiB (issue 30)."""
    limit = 2 * 1024 * 1024
    settings.JOB_MAX_BYTES = limit
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = limit + 64 * 1024  # as settings.py derives it
    comment = "# " + "x" * (1536 * 1024) + "\n"  # a job of 1.5 MiB
    assert submit(alice, comment + hello_job("big")).status_code == 202
    longer = "# " + "x" * limit + "\n"
    response = submit(alice, longer + hello_job("bigger"))
    assert response.status_code == 400
    assert f"more than the limit of {limit}" in response.json()["message"]
    assert not Job.objects.filter(name="bigger").exists()


@contextmanager
def open_files_at_most(limit: int):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(limit, soft), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_job_the_backend_cannot_place_fails_alone(alice, backend, settings):
    """Queued before the limit was lowered, a job asks more ports than the worker may open
    files: its placement fails ("too many open files"), the pass goes on and starts the rest."""
    settings.JOB_MAX_PORTS_PER_TASK = 100_000
    greedy = lifecycle.submit(alice, with_ports("greedy", "{http: 3000}"))
    Storage.objects.create(name="home", kind="nfs", server="nfs", path="/x", open_to_all=True)
    nfs = lifecycle.submit(
        alice,
        hello_job("nfs")
        + "extras:\n  com.microsoft.pai.runtimeplugin:\n    - plugin: teamwise_storage\n"
        "      parameters: {storageConfigNames: [home]}\n",
    )
    modest = lifecycle.submit(alice, hello_job("modest"))
    with open_files_at_most(1024):
        report = run_pass(backend)
    assert report.admitted == 2
    greedy.refresh_from_db()
    assert greedy.state == JobState.FAILED
    assert greedy.reason.startswith("could not be placed:") and "open files" in greedy.reason
    assert not Task.objects.filter(attempt__job=greedy).exists()
    assert settle(backend, modest).state == JobState.SUCCEEDED
    nfs = settle(backend, nfs)  # launched in the same pass, refused by the backend: fails alone
    assert nfs.state == JobState.FAILED
    assert "can only mount local-dir" in Task.objects.get(attempt__job=nfs).diagnostics
