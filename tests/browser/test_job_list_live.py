"""The job list follows its jobs live, and Stop (one job or several) asks first."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from jobs import lifecycle
from jobs.models import Job
from jobs.states import JobState
from tests.browser.pages import log_in
from tests.jobs.samples import hello_job
from tests.waiting import wait_for

pytestmark = pytest.mark.browser


def state_of(name: str) -> str:
    return Job.objects.get(name=name).state


def test_the_list_shows_a_state_change_without_a_reload(portal_url, browser_page, alice):
    job = lifecycle.submit(alice, hello_job("long", command="sleep 120"))
    wait_for(lambda: state_of("long") == JobState.RUNNING)
    page = browser_page
    log_in(page, portal_url, "alice", "alice-secret-pw")
    row = page.locator(f"#job-{job.id}")
    assert row.locator(".state").inner_text() == "RUNNING"
    page.wait_for_function("window.jobListNews && window.jobListNews.readyState === 1")
    page.evaluate("window.stillTheSamePage = true")
    lifecycle.stop(Job.objects.get(id=job.id), alice)  # elsewhere: the API, another tab
    row.locator(".state", has_text="STOPPED").wait_for()
    assert page.evaluate("window.stillTheSamePage") is True


def test_bulk_stop_asks_first(portal_url, browser_page, alice):
    job = lifecycle.submit(alice, hello_job("many", command="sleep 120"))
    wait_for(lambda: state_of("many") == JobState.RUNNING)
    page = browser_page
    log_in(page, portal_url, "alice", "alice-secret-pw")
    page.locator(f"#job-{job.id} input[name=job]").check()
    asked: list[str] = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    page.evaluate("window.stillTheSamePage = true")
    page.click("#stop-selected")
    assert asked == ["Stop 1 selected job? Their tasks are killed."]
    assert page.evaluate("window.stillTheSamePage") is True  # dismissed: nothing posted
    assert state_of("many") == JobState.RUNNING
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#stop-selected")
    page.locator(".flash", has_text="Stopping 1 job").wait_for()
    assert state_of("many") in (JobState.STOPPING, JobState.STOPPED)


def test_stop_on_the_job_page_asks_first(portal_url, browser_page, alice):
    lifecycle.submit(alice, hello_job("to_stop", command="sleep 120"))
    page = browser_page
    log_in(page, portal_url, "alice", "alice-secret-pw")
    page.goto(f"{portal_url}/jobs/alice~to_stop/")
    page.locator("#live .summary .state", has_text="RUNNING").wait_for()
    asked: list[str] = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    page.click("#stop")
    assert asked == ["Stop alice~to_stop? Its tasks are killed."]
    assert state_of("to_stop") == JobState.RUNNING
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#stop")
    page.locator("#live .summary .state", has_text="STOPPED").wait_for()


def test_the_list_reads_its_rows_again_once_its_socket_listens(portal_url, browser_page, alice):
    """A job that ends between the list's rendering and its subscription sent its news to
    nobody: the list shows its end all the same (one row stayed STOPPING in 1 of 4 tries)."""
    job = lifecycle.submit(alice, hello_job("racing", command="sleep 120"))
    wait_for(lambda: state_of("racing") == JobState.RUNNING)
    page = browser_page
    log_in(page, portal_url, "alice", "alice-secret-pw")
    row = page.locator(f"#job-{job.id}")
    row.locator(".state", has_text="RUNNING").wait_for()

    def stop_and_wait() -> None:
        try:
            lifecycle.stop(Job.objects.get(id=job.id), alice)
            wait_for(lambda: state_of("racing") == JobState.STOPPED)  # its news sent, unheard
        finally:
            connection.close()

    def stopped_then_subscribed(socket) -> None:
        with ThreadPoolExecutor(1) as pool:  # not in Playwright's event loop: stop sends news
            pool.submit(stop_and_wait).result()
        socket.connect_to_server()

    page.route_web_socket("**/ws/jobs/?ids=*", stopped_then_subscribed)
    page.reload()  # rendered RUNNING; the job ends before its socket subscribes
    row.locator(".state", has_text="STOPPED").wait_for(timeout=10_000)


def test_times_read_relative_with_the_absolute_time_on_hover(portal_url, browser_page, alice):
    from datetime import timedelta

    from django.utils import timezone

    job = lifecycle.submit(alice, hello_job("earlier"))
    Job.objects.filter(id=job.id).update(created_at=timezone.now() - timedelta(minutes=42))
    page = browser_page
    log_in(page, portal_url, "alice", "alice-secret-pw")
    submitted = page.locator(f"#job-{job.id} time")
    assert submitted.inner_text() == "42 min ago"
    absolute = submitted.get_attribute("title")
    assert absolute and absolute.startswith(str(timezone.localtime().year)) and ":" in absolute
    page.goto(f"{portal_url}/jobs/alice~earlier/")
    assert page.locator("#live time").first.inner_text() == "42 min ago"
