"""A new user pastes the README's first job, exactly as shown, and sees it succeed on this
machine's real capacity (not the roomy cluster the other tests get)."""

from __future__ import annotations

import os

import pytest

from clusters.models import Node
from tests.browser.pages import assert_tasks_succeeded, log_in
from tests.readme import first_job

pytestmark = pytest.mark.browser


@pytest.fixture(autouse=True)
def _roomy_cluster() -> None:
    """Overrides the shared fixture: admission sees this machine's real CPUs and memory."""


def test_the_readmes_first_job_succeeds_on_this_machine(portal_url, browser_page, alice):
    page = browser_page
    log_in(page, portal_url, "alice", "alice-secret-pw")
    page.goto(f"{portal_url}/jobs/submit/")
    page.fill("#id_text", first_job())
    page.locator("#valid").wait_for()
    page.click("#text-form button[type=submit]")
    page.wait_for_url(f"{portal_url}/jobs/alice~hello_distributed/")
    page.locator("#live .summary .state", has_text="SUCCEEDED").wait_for()
    assert_tasks_succeeded(page, ("ps_server-0", "worker-0"))
    logs = page.locator("#live .logs").inner_text()
    assert "hello from the parameter server" in logs
    assert "workers: 127.0.0.1:" in logs and "ps: 127.0.0.1:" in logs
    # Admission used the machine's own capacity (2 cores here), not the tests' roomy one.
    assert sum(Node.objects.values_list("cpu", flat=True)) == os.cpu_count()
