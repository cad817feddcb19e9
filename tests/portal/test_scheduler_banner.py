"""Pages say when the reconcile loop (beat + worker) has not completed a pass for a while."""

from __future__ import annotations

import html
import time

import pytest
import redis
from django.test import Client

from jobs import lifecycle
from jobs.lifecycle.passes import run_pass
from jobs.wakeup import FIRST_ASKED_KEY, LAST_RUN_KEY
from tests.jobs.samples import hello_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def last_pass(settings):
    """Sets when the last reconcile pass ended, in seconds ago (None: never)."""
    client = redis.Redis.from_url(settings.REDIS_URL)

    def ended(seconds_ago: float | None) -> None:
        client.delete(FIRST_ASKED_KEY)
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


def test_a_fresh_start_shows_no_banner_while_the_first_pass_is_on_its_way(web, last_pass):
    """For about 30 s after a first start every page said jobs would not run "until the Celery
    worker and beat are back" though both were starting."""
    last_pass(None)
    assert banner(web, "/jobs/") == ""
    assert banner(web, "/jobs/submit/") == ""


def test_a_scheduler_that_never_ran_is_named_once_it_is_late(web, last_pass, settings):
    last_pass(None)
    assert banner(web, "/jobs/") == ""  # the portal's first page: the wait starts now
    client = redis.Redis.from_url(settings.REDIS_URL)
    first = float(client.get(FIRST_ASKED_KEY))
    client.set(FIRST_ASKED_KEY, first - settings.SCHEDULER_LATE_SECONDS - 5)  # a while ago
    client.close()
    text = banner(web, "/jobs/")
    assert text.startswith("The scheduler has not run yet (")
    assert "until the Celery worker and beat are back" in text


def test_visitors_who_are_not_signed_in_see_no_banner(db, last_pass, settings):
    last_pass(settings.SCHEDULER_LATE_SECONDS + 90)
    assert banner(Client(), "/login/") == ""


def test_pages_still_answer_when_redis_is_down(web, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    response = web.get("/jobs/")
    assert response.status_code == 200
    assert b"scheduler-late" not in response.content


def status_url(client: Client, path: str = "/jobs/") -> str:
    """The status URL, with its ticket, that a page rendered for ``client``'s user asks."""
    page = client.get(path).content.decode()
    start = page.index('data-url="') + len('data-url="')
    return html.unescape(page[start : page.index('"', start)])


def test_an_open_page_learns_that_the_scheduler_is_late(web, last_pass, settings):
    last_pass(settings.SCHEDULER_LATE_SECONDS / 2)
    url = status_url(web)
    assert Client().get(url).json() == {"late": False, "message": ""}
    last_pass(settings.SCHEDULER_LATE_SECONDS + 90)
    body = Client().get(url).json()
    assert body["late"] is True
    assert body["message"].startswith("The scheduler has not run for ")


def test_the_status_answer_reads_no_database_row_and_is_not_cached(
    web, last_pass, settings, django_assert_num_queries
):
    url = status_url(web)
    last_pass(settings.SCHEDULER_LATE_SECONDS + 90)
    with django_assert_num_queries(0):
        response = web.get(url)  # with the session cookie too: it is not read
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]


@pytest.mark.parametrize("ticket", ["", "?ticket=made-up", "?ticket=1:forged:signature"])
def test_the_status_answer_needs_a_ticket_of_a_page(db, ticket):
    response = Client().get(f"/scheduler-status{ticket}")
    assert response.status_code == 403
    assert "ticket" in response.json()["message"]


def test_every_page_of_a_signed_in_user_asks_every_scheduler_check_seconds(web, settings):
    settings.SCHEDULER_CHECK_SECONDS = 2.5
    page = web.get("/jobs/").content.decode()
    assert 'data-every-ms="2500"' in page
    assert "portal/scheduler-status.js" in page


def test_visitors_who_are_not_signed_in_get_no_status_script(db):
    assert b"scheduler-status" not in Client().get("/login/").content
