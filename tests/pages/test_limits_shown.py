"""What the kernel holds a local task to is said where people look: the admin's Nodes page lists
each limit on this host, and where one cannot be enforced the job page of a task that ran
without it says so (never silently unlimited). On Slurm the job page says whose account its
tasks run as."""

from __future__ import annotations

import os
from dataclasses import replace
from html import unescape

import pytest
from django.test import Client
from django.urls import reverse
from django.utils.html import escape

from clusters import registry
from jobs import lifecycle
from jobs.states import JobState
from tests.jobs.helpers import settle
from tests.jobs.samples import hello_job
from tests.support.local_tasks import without_pids

pytestmark = pytest.mark.django_db(transaction=True)
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="the kernel's limits need root")


def test_the_nodes_page_lists_the_limits_of_a_task_on_this_host(client: Client, admin, backend):
    client.force_login(admin)
    page = client.get("/manage/nodes/").content.decode()
    for line in backend.describe_limits():
        assert f"<li>{escape(line)}</li>" in page
    assert "Not limited here" not in page


@as_root
def test_a_job_run_without_a_limit_says_so_on_its_page_and_the_nodes_page(
    client: Client, admin, alice, backend, settings
):
    backend.__dict__["host_limits"] = without_pids(backend)
    refused = settle(backend, lifecycle.submit(alice, hello_job("refused")))
    assert "cannot limit the pids of a task" in refused.reason
    backend.sandbox = replace(backend.sandbox, require_limits=False)  # LOCAL_REQUIRE_LIMITS
    allowed = settle(backend, lifecycle.submit(alice, hello_job("allowed")))
    assert allowed.state == JobState.SUCCEEDED, allowed.reason
    client.force_login(alice)
    page = client.get(f"/jobs/alice~{allowed.name}/").content.decode()
    assert "This machine cannot limit the pids of a task" in page
    client.force_login(admin)
    nodes = client.get("/manage/nodes/").content.decode()
    assert "pids NOT limited (controller unavailable)" in nodes
    assert "network: tasks reach this host only on task ports, the portal&#x27;s port" in nodes
    assert "Not limited here: pids." in nodes


@pytest.fixture
def on_slurm(settings):
    """The portal set to the Slurm backend (nothing is run: the page only asks who)."""
    settings.CLUSTER_BACKEND = "slurm"
    settings.SLURM_USER_ACCOUNTS = {"alice": "slurmalice"}
    registry.get_backend.cache_clear()
    yield
    registry.get_backend.cache_clear()


def test_the_job_page_says_who_a_slurm_jobs_tasks_run_as(client: Client, alice, bob, on_slurm):
    for owner, who in ((alice, "the account slurmalice"), (bob, "the portal's own account")):
        job = lifecycle.submit(owner, hello_job(f"{owner.username}_job"))
        client.force_login(owner)
        page = client.get(reverse("jobs:detail", args=[owner.username, job.name])).content
        runs_as = page.decode().split('id="runs-as">')[1].split("</p>")[0]
        assert who in unescape(runs_as) and "image is not used" in runs_as
