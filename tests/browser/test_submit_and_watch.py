"""A person logs in, pastes a job, and watches it run to the end without reloading."""

from __future__ import annotations

import textwrap

import pytest

from tests.browser.pages import log_in

pytestmark = pytest.mark.browser

JOB = textwrap.dedent("""\
    protocolVersion: 2
    name: watch_me
    type: job
    prerequisites: [{name: img, type: dockerimage, uri: python}]
    taskRoles:
      ps_server:
        instances: 1
        completion: {minSucceededInstances: -1}
        dockerImage: img
        resourcePerInstance: {cpu: 1, memoryMB: 128, gpu: 0, ports: {http: 1}}
        commands: ["sleep 1", "echo ps done"]
      worker:
        instances: 2
        dockerImage: img
        resourcePerInstance: {cpu: 1, memoryMB: 128, gpu: 0, ports: {http: 1}}
        commands: ["sleep 3", "echo hosts=$PAI_TASK_ROLE_worker_HOST_LIST"]
    """)


def test_a_pasted_job_is_seen_running_then_succeeding_live(portal_url, browser_page, alice):
    page = browser_page
    log_in(page, portal_url, "alice", "alice-secret-pw")
    page.click("text=Submit")
    page.fill("#id_text", JOB)
    page.click("form.submit button[type=submit]")
    page.wait_for_url(f"{portal_url}/jobs/alice~watch_me/")
    page.evaluate("window.stillTheSamePage = true")

    page.locator("#task-worker-1 .state", has_text="RUNNING").wait_for()
    assert page.locator("#stop").is_visible()
    page.locator("#live .summary .state", has_text="SUCCEEDED").wait_for()

    assert page.evaluate("window.stillTheSamePage") is True
    assert page.locator("#task-worker-0 .state").inner_text() == "SUCCEEDED"
    assert "127.0.0.1" in page.locator("#task-worker-0").inner_text()
    assert "hosts=127.0.0.1:" in page.locator("#live .logs").inner_text()
    assert not page.locator("#stop").is_visible()  # nothing left to stop


def test_a_bad_job_shows_its_errors_on_the_page(portal_url, browser_page, alice):
    page = browser_page
    log_in(page, portal_url, "alice", "alice-secret-pw")
    page.goto(f"{portal_url}/jobs/submit/")
    page.fill("#id_text", JOB.replace("cpu: 1", "cpu: lots"))
    page.click("form.submit button[type=submit]")
    assert "taskRoles.ps_server.resourcePerInstance.cpu" in page.locator(".errors").inner_text()
