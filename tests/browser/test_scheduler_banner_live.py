"""An open page shows the "scheduler has not run" banner when the reconcile loop stops, and
takes it away when it runs again, without a reload (portal/scheduler_status.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from jobs import lifecycle
from jobs.wakeup import FIRST_ASKED_KEY, LAST_RUN_KEY
from tests.browser.pages import log_in
from tests.jobs.samples import hello_job
from tests.support.servers import web_server

pytestmark = pytest.mark.browser

LATE_SECONDS = 60


@pytest.fixture
def portal_without_beat(transactional_db, settings) -> Iterator[str]:
    """The portal (uvicorn) with no reconcile pass of its own (the last pass is what the
    test writes), its pages asking about the scheduler every half second."""
    with web_server(
        CHANNEL_LAYER_PREFIX=settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"],
        SCHEDULER_LATE_SECONDS=str(LATE_SECONDS),
        SCHEDULER_CHECK_SECONDS="0.5",
    ) as url:
        yield url


@pytest.fixture
def last_pass(settings) -> Iterator[redis.Redis]:
    with redis.Redis.from_url(settings.REDIS_URL) as client:
        yield client


def test_an_open_job_page_shows_and_clears_the_banner_without_reload(
    portal_without_beat, browser_page, alice, last_pass
):
    page, base = browser_page, portal_without_beat
    lifecycle.submit(alice, hello_job())
    last_pass.set(LAST_RUN_KEY, time.time())  # the scheduler runs
    log_in(page, base, "alice", "alice-secret-pw")
    page.goto(f"{base}/jobs/alice~hello/")
    banner = page.locator("#scheduler-status .scheduler-late")
    assert banner.count() == 0
    page.evaluate("window.stillTheSamePage = true")

    last_pass.set(LAST_RUN_KEY, time.time() - LATE_SECONDS - 600)  # beat stopped long ago
    banner.wait_for()
    assert banner.inner_text().startswith("The scheduler has not run for ")

    last_pass.set(LAST_RUN_KEY, time.time())  # beat is back
    banner.wait_for(state="detached")
    assert page.evaluate("window.stillTheSamePage") is True


def test_a_fresh_start_shows_no_banner_until_the_first_pass_is_late(
    portal_without_beat, browser_page, alice, last_pass
):
    """For about 30 s after a first start every page said jobs would not run "until the Celery
    worker and beat are back" though both were starting (issue 28)."""
    page, base = browser_page, portal_without_beat
    last_pass.delete(LAST_RUN_KEY, FIRST_ASKED_KEY)  # a fresh Redis: no pass has ever ended
    log_in(page, base, "alice", "alice-secret-pw")
    answers: list[dict] = []
    page.on(
        "response",
        lambda r: answers.append(r.json()) if "/scheduler-status" in r.url and r.ok else None,
    )
    deadline = time.monotonic() + 10
    while len(answers) < 4 and time.monotonic() < deadline:
        page.wait_for_timeout(250)
    assert len(answers) >= 4 and not any(a["late"] for a in answers)
    assert page.locator("#scheduler-status .scheduler-late").count() == 0

    last_pass.set(FIRST_ASKED_KEY, time.time() - LATE_SECONDS - 5)  # still none, a minute on
    banner = page.locator("#scheduler-status .scheduler-late")
    banner.wait_for()
    assert banner.inner_text().startswith("The scheduler has not run yet (")
