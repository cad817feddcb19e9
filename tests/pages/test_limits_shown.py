"""What the kernel holds a local task to is said where people look: the admin's Nodes page lists
each limit on this host, and where one cannot be enforced the job page of a task that ran
without it says so (never silently unlimited)."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest
from django.test import Client
from django.utils.html import escape

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
