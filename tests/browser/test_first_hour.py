"""The first hour in the browser: clone a job and enter its secret again, read the API docs
with nothing but loopback reachable, and a two-role job built in the form runs both roles."""

from __future__ import annotations

import textwrap
from urllib.parse import urlsplit

import pytest

from jobs import lifecycle
from tests.browser.pages import assert_tasks_succeeded, log_in

pytestmark = pytest.mark.browser

SECRET_JOB = textwrap.dedent("""\
    # Prints the length of its token; the comment stays in a clone.
    protocolVersion: 2
    name: with_secret
    type: job
    prerequisites: [{name: img, type: dockerimage, uri: python}]
    secrets: {token: first-s3cr3t}
    taskRoles:
      main:
        dockerImage: img
        resourcePerInstance: {cpu: 1, memoryMB: 128, gpu: 0}
        commands:
          - 'echo token-length=$(printf %s "<% $secrets.token %>" | wc -c)'
    """)


def test_a_cloned_job_with_its_secret_entered_again_runs(portal_url, browser_page, alice):
    lifecycle.submit(alice, SECRET_JOB)
    page = browser_page
    log_in(page, portal_url, "alice", "alice-secret-pw")
    page.goto(f"{portal_url}/jobs/alice~with_secret/")
    page.click("#clone")
    page.wait_for_url(f"{portal_url}/jobs/alice~with_secret/clone/")
    text = page.input_value("#id_text")
    assert "first-s3cr3t" not in text and "name: with_secret_clone" in text
    assert text.startswith("# Prints the length of its token; the comment stays in a clone.")
    assert "secrets.token" in page.locator("#masked-secrets").inner_text()
    # Left masked, the secret is refused by name, and what was posted stays.
    page.click("#text-form button[type=submit]")
    assert "secrets.token: still ******" in page.locator(".errors").inner_text()
    assert page.input_value("#id_text") == text
    page.fill("#id_text", text.replace("'******'", "******").replace("******", "a-new-s3cr3t"))
    page.click("#text-form button[type=submit]")
    page.wait_for_url(f"{portal_url}/jobs/alice~with_secret_clone/")
    page.locator("#live .summary .state", has_text="SUCCEEDED").wait_for()
    assert "token-length=12" in page.locator("#live .logs").inner_text()  # a-new-s3cr3t


def test_a_cloned_job_is_submitted_from_its_form_tab(portal_url, browser_page, alice):
    lifecycle.submit(alice, SECRET_JOB)
    page = browser_page
    log_in(page, portal_url, "alice", "alice-secret-pw")
    page.goto(f"{portal_url}/jobs/alice~with_secret/clone/")
    page.click("#tab-form")
    assert page.input_value("#f-name") == "with_secret_clone"
    assert page.input_value("input[name=role-0-name]") == "main"
    assert page.input_value("textarea[name=secrets]") == "token: ******"
    page.fill("textarea[name=secrets]", "token: typed-in-the-form")
    page.click("#submit-form")
    page.wait_for_url(f"{portal_url}/jobs/alice~with_secret_clone/")
    page.locator("#live .summary .state", has_text="SUCCEEDED").wait_for()
    assert "token-length=17" in page.locator("#live .logs").inner_text()


def test_the_api_docs_list_the_operations_with_only_loopback_reachable(portal_url, browser_page):
    page = browser_page
    aborted: list[str] = []

    def loopback_only(route) -> None:  # type: ignore[no-untyped-def]
        url = route.request.url
        if urlsplit(url).hostname in ("127.0.0.1", "localhost"):
            route.continue_()
        else:
            aborted.append(url)
            route.abort()

    page.route("**/*", loopback_only)
    page.goto(f"{portal_url}/api/docs/")
    operations = page.locator("[data-section-id^='operation/']")
    operations.first.wait_for()
    page.wait_for_load_state("networkidle")
    assert operations.count() >= 10
    assert "/api/v2/jobs" in page.locator("body").inner_text()
    assert aborted == []


def test_a_two_role_form_job_runs_both_roles_to_the_end(portal_url, browser_page, alice):
    page = browser_page
    log_in(page, portal_url, "alice", "alice-secret-pw")
    page.goto(f"{portal_url}/jobs/submit/")
    page.click("#tab-form")
    page.fill("#f-name", "two_roles")
    first = page.locator("#roles .role").nth(0)
    first.locator("input[name$=-name]").fill("quick")
    first.locator("textarea").fill("echo quick done")
    first.locator("input[name$=-min_succeeded]").fill("")  # left blank
    page.click("#add-role")
    second = page.locator("#roles .role").nth(1)
    second.locator("input[name$=-name]").fill("slow")
    second.locator("textarea").fill("sleep 5\necho slow done")
    second.locator("input[name$=-min_succeeded]").fill("")
    page.click("#submit-form")
    page.wait_for_url(f"{portal_url}/jobs/alice~two_roles/")
    page.locator("#live .summary .state", has_text="SUCCEEDED").wait_for()
    assert_tasks_succeeded(page, ("quick-0", "slow-0"))
    assert "slow done" in page.locator("#live .logs").inner_text()
