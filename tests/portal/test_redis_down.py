"""Redis stopped and started under a running portal: reads keep working, writes are stored whole
(a submission waits for the beat pass) or refused with a 503 that says why, never a 500."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import redis
import requests
from django.http import HttpRequest
from django.test import Client

from accounts.models import ApiToken
from jobs.models import Job, JobEvent
from portal.unavailable import ServiceUnavailableMiddleware
from tests.jobs.samples import hello_job
from tests.support.servers import web_server
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

API_READS = [
    "/api/v2/jobs",
    "/api/v2/jobs?username=alice&withTotalCount=true",
    "/api/v2/jobs/alice~before",
    "/api/v2/jobs/alice~before/config",
    "/api/v2/jobs/alice~before/events",
    "/api/v2/info",
    "/api/v2/users/me",
    "/api/v2/virtual-clusters",
    "/api/v2/authn/info",
]
PAGES = [
    "/",
    "/jobs/",
    "/jobs/submit/",
    "/jobs/alice~before/",
    "/jobs/alice~before/live/",
    "/virtual-clusters/",
]
THROTTLE_WARNING = "API rate limits are not enforced"


def beat_loop(backend: object, stop: threading.Event, failed: threading.Event) -> None:
    """What beat does: a reconcile pass every few tenths of a second, going on when one fails
    because Redis is down (``failed`` is set then)."""
    from django.db import connection

    from jobs.lifecycle.passes import reconcile

    try:
        while not stop.is_set():
            try:
                reconcile(backend, full=True)  # type: ignore[arg-type]
            except redis.exceptions.ConnectionError:
                failed.set()
            stop.wait(0.3)
    finally:
        connection.close()


def test_with_redis_down_reads_answer_and_a_submission_waits_for_it(
    redis_server, alice, backend, settings, tmp_path: Path
):
    settings.REDIS_URL = redis_server.url  # the test's beat pass locks on the private Redis
    token = ApiToken.objects.issue(alice, 3600)[1]
    browser = Client()
    browser.force_login(alice)
    api = requests.Session()
    api.headers["Authorization"] = f"Bearer {token}"
    page = requests.Session()
    page.cookies.set("sessionid", browser.cookies["sessionid"].value)
    log_path = tmp_path / "server.log"
    stop, failed = threading.Event(), threading.Event()
    beat = threading.Thread(target=beat_loop, args=(backend, stop, failed), daemon=True)
    with web_server(log_path, REDIS_URL=redis_server.url) as base:
        before = api.post(f"{base}/api/v2/jobs", hello_job("before", "sleep 60"), timeout=30)
        assert before.status_code == 202
        redis_server.stop()

        for path in API_READS:
            answer = api.get(base + path, timeout=30)
            assert answer.status_code == 200, (path, answer.text[:300])
        for path in PAGES:
            answer = page.get(base + path, timeout=30)
            assert answer.status_code == 200, (path, answer.text[:300])

        submitted = api.post(f"{base}/api/v2/jobs", hello_job("while-down"), timeout=30)
        assert submitted.status_code == 202, submitted.text
        stopped = api.put(
            f"{base}/api/v2/jobs/alice~before/executionType", json={"value": "STOP"}, timeout=30
        )
        assert stopped.status_code == 202, stopped.text
        page.get(f"{base}/jobs/submit/", timeout=30)  # the CSRF cookie, as a browser gets it
        csrf = {"X-CSRFToken": page.cookies["csrftoken"], "Referer": base}
        checked = page.post(
            f"{base}/jobs/submit/validate/", {"text": hello_job("x")}, headers=csrf, timeout=30
        )
        assert checked.status_code == 200, checked.text[:300]
        form = {"mode": "text", "text": hello_job("page-while-down")}
        posted = page.post(f"{base}/jobs/submit/", form, headers=csrf, timeout=30)
        assert posted.status_code == 200 and "page-while-down" in posted.url, posted.text[:300]

        # Stored whole: the job and its "submitted" event, waiting for a pass.
        job = Job.objects.get(owner=alice, name="while-down")
        assert job.state == "WAITING"
        assert JobEvent.objects.filter(job=job, kind="submitted").exists()
        assert Job.objects.get(name="page-while-down").state == "WAITING"
        assert Job.objects.get(name="before").state in {"STOPPING", "STOPPED"}
        # The rate limit said once that it is not enforced, not once per request.
        assert log_path.read_text().count(THROTTLE_WARNING) == 1
        assert " 500 " not in log_path.read_text()

        beat.start()  # beat may run while Redis is down: its passes fail and it goes on
        assert failed.wait(30)
        assert Job.objects.get(pk=job.pk).state == "WAITING"
        redis_server.start()
        try:
            wait_for(lambda: Job.objects.get(pk=job.pk).state == "SUCCEEDED", timeout=60)
            assert api.get(f"{base}/api/v2/jobs/alice~while-down", timeout=30).json()["jobStatus"][
                "state"
            ] == ("SUCCEEDED")
            again = api.post(f"{base}/api/v2/jobs", hello_job("after"), timeout=30)
            assert again.status_code == 202
            wait_for(lambda: Job.objects.get(name="after").state == "SUCCEEDED", timeout=60)
        finally:
            stop.set()
            beat.join(10)


def test_a_request_that_needs_redis_while_it_is_down_gets_a_503_that_says_so(redis_server, alice):
    """The net under every view: what still needs Redis while it is down is refused with a 503
    (OpenPAI's JSON under /api/, a page elsewhere), raised before anything committed."""
    redis_server.stop()
    try:
        redis.Redis.from_url(redis_server.url).set("k", "v")
    except redis.exceptions.ConnectionError as exc:
        down = exc
    middleware = ServiceUnavailableMiddleware(lambda request: None)  # type: ignore[arg-type,return-value]

    api_request = HttpRequest()
    api_request.path = "/api/v2/jobs"
    answer = middleware.process_exception(api_request, down)
    assert answer.status_code == 503
    assert answer["Content-Type"] == "application/json"
    assert b'"code": "ServiceUnavailable"' in answer.content
    assert b"Redis" in answer.content and b"nothing was stored" in answer.content

    page_request = HttpRequest()
    page_request.path = "/jobs/submit/"
    page_request.user = alice
    answer = middleware.process_exception(page_request, down)
    assert answer.status_code == 503
    assert b"Service unavailable" in answer.content and b"Redis" in answer.content
    assert middleware.process_exception(page_request, ValueError("other")) is None
