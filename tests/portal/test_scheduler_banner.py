"""Pages say when the reconcile loop (beat + worker) has not completed a pass for a while."""

from __future__ import annotations

import time

import pytest
import redis
from django.test import Client

from jobs import lifecycle
from jobs.lifecycle.passes import LAST_RUN_KEY, run_pass
from tests.jobs.samples import hello_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def last_pass(settings):
    """Sets when the last reconcile pass ended, in seconds ago (None: never)."""
    client = redis.Redis.from_url(settings.REDIS_URL)

    def ended(seconds_ago: float | None) -> None:
        if seconds_ago is None:
            client.delete(LAST_RUN_KEY)
        else:
            client.set(LAST_RUN_KEY, time.time() - seconds_ago)

    yield ended
    client.close()


def banner(client: Client, path: str) -> str:
    response = client.get(path)
    assert response.status_code == 200, path
    page = response.content.decode()
    start = page.find('class="scheduler-late"')
    return "" if start < 0 else page[page.index(">", start) + 1 : page.index("</p>", start)]


def test_every_page_says_so_when_no_pass_ended_for_a_while(web, alice, last_pass, settings):
    job = lifecycle.submit(alice, hello_job())
    last_pass(settings.SCHEDULER_LATE_SECONDS + 90)
    for path in ("/jobs/", f"/jobs/alice~{job.name}/", "/jobs/submit/"):
        text = banner(web, path)
        assert text.startswith("The scheduler has not run for "), path
        assert "jobs will not start or finish until the Celery worker and beat are back" in text
    seconds = int(banner(web, "/jobs/").split("for ")[1].split(" s")[0])
    assert seconds >= settings.SCHEDULER_LATE_SECONDS + 90


def test_a_pass_that_ends_takes_the_banner_away(web, last_pass, backend, settings):
    last_pass(settings.SCHEDULER_LATE_SECONDS + 90)
    assert banner(web, "/jobs/")
    run_pass(backend)
    assert banner(web, "/jobs/") == ""


def test_a_recent_pass_shows_no_banner(web, last_pass, settings):
    last_pass(settings.SCHEDULER_LATE_SECONDS / 2)
    assert banner(web, "/jobs/") == ""


def test_a_scheduler_that_never_ran_is_named(web, last_pass):
    last_pass(None)
    assert banner(web, "/jobs/").startswith("The scheduler has not run yet:")


def test_visitors_who_are_not_signed_in_see_no_banner(db, last_pass, settings):
    last_pass(settings.SCHEDULER_LATE_SECONDS + 90)
    assert banner(Client(), "/login/") == ""


def test_pages_still_answer_when_redis_is_down(web, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    response = web.get("/jobs/")
    assert response.status_code == 200
    assert b"scheduler-late" not in response.content
