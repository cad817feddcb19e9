"""A script waits for its job in one request (``GET /api/v2/jobs/<user>~<name>?wait=<seconds>``),
as ``sbatch --wait`` does: answered once the job has finished, through the real web server and
the real Redis, holding none of the process's database connections while it waits; with Redis
gone it still answers; a bad ``wait`` is a 400 naming it."""

from __future__ import annotations

import asyncio
import socket
import uuid
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import pytest
import redis
import requests
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection
from django.test import AsyncClient

from accounts.models import ApiToken
from jobs import lifecycle, news
from jobs.lifecycle.finish import finish_job
from jobs.models import Job
from jobs.news import group_name
from jobs.states import JobState
from tests.jobs.samples import hello_job
from tests.support.servers import RedisServer, web_server
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
WAITERS = 12  # more than a web server process's database connections (its pool's 10)


def layer_prefix() -> str:
    return str(settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"])


def listening(redis_url: str, job: Job) -> int:
    """How many waits (or pages) listen to ``job``'s news in that Redis."""
    key = f"{layer_prefix()}:group:{group_name(job.id)}"
    return int(redis.Redis.from_url(redis_url).zcard(key))


def long_wait(base: str, token: str) -> requests.Response:
    """alice's job ``long``, waited for: at most 50 s, answered long before the client's 40."""
    return requests.get(
        f"{base}/api/v2/jobs/alice~long",
        params={"wait": 50},
        headers={"Authorization": f"Bearer {token}"},
        timeout=40,
    )


def test_waits_are_answered_when_the_job_finishes_and_hold_no_database_connection(alice, tmp_path):
    job = lifecycle.submit(alice, hello_job("long"))  # no worker: it waits until failed below
    token = ApiToken.objects.issue(alice, 3600)[1]
    headers = {"Authorization": f"Bearer {token}"}
    with web_server(tmp_path / "server.log", CHANNEL_LAYER_PREFIX=layer_prefix()) as base:
        url = f"{base}/api/v2/jobs/alice~long"
        with ThreadPoolExecutor(WAITERS) as pool:
            answers = pool.map(long_wait, [base] * WAITERS, [token] * WAITERS)
            wait_for(lambda: listening(settings.REDIS_URL, job) == WAITERS)
            # Another request still gets a connection: the pool would hand it none for 10 s.
            plain = requests.get(url, headers=headers, timeout=5)
            assert plain.status_code == 200
            assert plain.json()["jobStatus"]["state"] == "WAITING"
            assert finish_job(job, JobState.FAILED, "failed by the test")
            states = [(a.status_code, a.json()["jobStatus"]["state"]) for a in answers]
    assert states == [(200, "FAILED")] * WAITERS
    assert listening(settings.REDIS_URL, job) == 0  # each left its job's group


def test_news_that_the_job_finished_answers_a_wait_without_reading_its_state(alice, tmp_path):
    """The pass's news of a job's end says it has finished (``news.send_finished``), and the
    wait answers on it. Here that news comes while the job's row still says WAITING: the
    answer says WAITING, so the wait took the news's word instead of reading the state (which
    would have sent it back to waiting)."""
    job = lifecycle.submit(alice, hello_job("long"))
    token = ApiToken.objects.issue(alice, 3600)[1]
    with (
        web_server(tmp_path / "server.log", CHANNEL_LAYER_PREFIX=layer_prefix()) as base,
        ThreadPoolExecutor(1) as pool,
    ):
        answer = pool.submit(long_wait, base, token)
        wait_for(lambda: listening(settings.REDIS_URL, job) == 1)
        news.publish([job.id], finished=True)
        assert answer.result().json()["jobStatus"]["state"] == "WAITING"


def test_a_wait_counts_once_against_its_callers_rate_limit(alice, tmp_path):
    """Its answer is not a second request: with two requests a minute allowed, a waited one
    and a plain one both pass (counted twice, the plain one was refused: 429)."""
    job = lifecycle.submit(alice, hello_job("long"))
    token = ApiToken.objects.issue(alice, 3600)[1]
    redis.Redis.from_url(settings.REDIS_URL).delete(f":1:throttle_user_{alice.id}")
    env = {"CHANNEL_LAYER_PREFIX": layer_prefix(), "API_RATE_USER": "2/minute"}
    with web_server(tmp_path / "server.log", **env) as base, ThreadPoolExecutor(1) as pool:
        answer = pool.submit(long_wait, base, token)
        wait_for(lambda: listening(settings.REDIS_URL, job) == 1)
        assert finish_job(job, JobState.FAILED, "failed by the test")
        assert answer.result().json()["jobStatus"]["state"] == "FAILED"
        plain = requests.get(
            f"{base}/api/v2/jobs/alice~long",
            headers={"Authorization": f"Bearer {token}"},
            timeout=5,
        )
        assert plain.status_code == 200
        third = requests.get(
            f"{base}/api/v2/jobs/alice~long",
            headers={"Authorization": f"Bearer {token}"},
            timeout=5,
        )
        assert third.status_code == 429  # the limit still holds


def test_a_wait_still_ends_when_redis_stops_under_it(alice, tmp_path):
    job = lifecycle.submit(alice, hello_job("long"))
    token = ApiToken.objects.issue(alice, 3600)[1]
    own_redis = RedisServer()
    own_redis.start()
    try:
        server = web_server(
            tmp_path / "server.log", REDIS_URL=own_redis.url, CHANNEL_LAYER_PREFIX=layer_prefix()
        )
        with server as base, ThreadPoolExecutor(1) as pool:
            answer = pool.submit(long_wait, base, token)
            wait_for(lambda: listening(own_redis.url, job) == 1)
            own_redis.stop()
            assert finish_job(job, JobState.FAILED, "failed by the test")  # no news sent
            assert answer.result().json()["jobStatus"]["state"] == "FAILED"
    finally:
        own_redis.stop()
    assert "the channel layer failed" in (tmp_path / "server.log").read_text()


class Client:
    """alice's token on Django's in-process ASGI client."""

    def __init__(self, token: str) -> None:
        self.client, self.headers = AsyncClient(), {"Authorization": f"Bearer {token}"}

    async def get(self, path: str):
        return await self.client.get(path, headers=self.headers)


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="only PostgreSQL can end another's session"
)
def test_a_wait_outlives_its_servers_database_sessions_being_killed(alice, tmp_path):
    """A PostgreSQL restart or failover while a script waits: the wait reads the job again on
    a new connection, and answers."""
    job = lifecycle.submit(alice, hello_job("long"))
    token = ApiToken.objects.issue(alice, 3600)[1]
    app_name = f"portal-wait-{uuid.uuid4().hex[:12]}"  # only the server's sessions are killed

    def server_sessions() -> list[int]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s", [app_name]
            )
            return [row[0] for row in cursor.fetchall()]

    server = web_server(
        tmp_path / "server.log", PGAPPNAME=app_name, CHANNEL_LAYER_PREFIX=layer_prefix()
    )
    with server as base, ThreadPoolExecutor(1) as pool:
        answer = pool.submit(long_wait, base, token)
        wait_for(lambda: listening(settings.REDIS_URL, job) == 1)
        with connection.cursor() as cursor:
            for pid in server_sessions():
                cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
        wait_for(lambda: not server_sessions())
        assert finish_job(job, JobState.FAILED, "failed by the test")
        assert (answer.result().status_code, answer.result().json()["jobStatus"]["state"]) == (
            200,
            "FAILED",
        )


@pytest.fixture
def client(alice) -> Client:
    return Client(ApiToken.objects.issue(alice, 3600)[1])


@pytest.mark.asyncio
async def test_a_finished_job_is_answered_at_once_as_without_wait(alice, client):
    job = await sync_to_async(lifecycle.submit)(alice, hello_job("done"))
    await sync_to_async(finish_job)(job, JobState.FAILED, "failed by the test")
    plain = await client.get("/api/v2/jobs/alice~done")
    waited = await asyncio.wait_for(client.get("/api/v2/jobs/alice~done?wait=50"), 20)
    assert waited.status_code == plain.status_code == 200
    assert waited.json() == plain.json()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ("51", "less than or equal to 50"),
        ("-1", "greater than or equal to 0"),
        ("soon", "whole number"),
    ],
)
async def test_a_bad_wait_is_a_400_naming_it(alice, client, value, rule):
    await sync_to_async(lifecycle.submit)(alice, hello_job("long"))
    answer = await client.get(f"/api/v2/jobs/alice~long?wait={value}")
    assert answer.status_code == 400
    assert answer.json()["message"].startswith("wait: ")
    assert rule in answer.json()["message"]


@pytest.mark.asyncio
async def test_a_job_that_is_not_there_is_a_404_at_once(client):
    answer = await asyncio.wait_for(client.get("/api/v2/jobs/alice~nothing?wait=50"), 20)
    assert answer.status_code == 404


@pytest.mark.asyncio
async def test_past_the_most_waits_at_once_a_wait_answers_at_once(alice, client, settings):
    await sync_to_async(lifecycle.submit)(alice, hello_job("long"))
    settings.API_WAITS_MAX = 0
    answer = await asyncio.wait_for(client.get("/api/v2/jobs/alice~long?wait=50"), 20)
    assert answer.json()["jobStatus"]["state"] == "WAITING"


def test_a_client_that_goes_away_leaves_its_wait(alice, tmp_path):
    """Its job's group loses it and the process's count of waits goes down: else the waits
    of clients gone would add up to ``API_WAITS_MAX`` and every later wait answer at once."""
    job = lifecycle.submit(alice, hello_job("long"))
    token = ApiToken.objects.issue(alice, 3600)[1]
    log = tmp_path / "server.log"
    with web_server(log, CHANNEL_LAYER_PREFIX=layer_prefix(), API_WAITS_MAX="1") as base:
        request = (
            f"GET /api/v2/jobs/alice~long?wait=50 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {token}\r\n\r\n"
        ).encode()
        address = urlsplit(base)
        with socket.create_connection((address.hostname, address.port), timeout=30) as gone:
            gone.sendall(request)
            wait_for(lambda: listening(settings.REDIS_URL, job) == 1)
        wait_for(lambda: listening(settings.REDIS_URL, job) == 0)
        with ThreadPoolExecutor(1) as pool:
            answer = pool.submit(long_wait, base, token)
            wait_for(lambda: listening(settings.REDIS_URL, job) == 1)
            assert finish_job(job, JobState.FAILED, "failed by the test")
            assert answer.result().json()["jobStatus"]["state"] == "FAILED"
    assert "waits at once" not in log.read_text()


@pytest.mark.asyncio
async def test_an_anonymous_caller_is_answered_at_once(alice, settings):
    """It may read a job's status (``API_ANONYMOUS_JOB_STATUS``), not hold a wait."""
    settings.API_ANONYMOUS_JOB_STATUS = True
    await sync_to_async(lifecycle.submit)(alice, hello_job("long"))
    answer = await asyncio.wait_for(AsyncClient().get("/api/v2/jobs/alice~long?wait=50"), 20)
    assert answer.status_code == 200
    assert answer.json()["jobStatus"]["state"] == "WAITING"
