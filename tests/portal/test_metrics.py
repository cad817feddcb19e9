"""GET /metrics (portal.metrics): the portal's state in Prometheus's text format, read with the
official client's parser; only for allowed networks and, when set, METRICS_TOKEN; a fixed
number of queries however many jobs; and the Grafana dashboard reads only what it exports."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from clusters.models import Node, VirtualCluster
from jobs import lifecycle
from jobs.models import Job, JobAttempt, Task
from jobs.wakeup import LAST_RUN_KEY
from portal.metrics import QUERIES_PER_SCRAPE
from tests.jobs.samples import hello_job

pytestmark = pytest.mark.django_db

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "portal-dashboard.json"


def scrape(client: Client | None = None, **extra: str) -> dict[str, dict[tuple, float]]:
    """Each family's samples by their sorted labels, parsed by prometheus_client's parser."""
    response = (client or Client()).get("/metrics", **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    families: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(response.content.decode()):
        samples = families.setdefault(family.name, {})
        for sample in family.samples:
            samples[tuple(sorted(sample.labels.items()))] = sample.value
    return families


def vc_state(vc: str, state: str) -> tuple:
    return (("state", state), ("virtual_cluster", vc))


def with_task(job: Job, state: str, started: bool, ended: bool) -> Task:
    attempt = JobAttempt.objects.create(job=job, number=0, key=f"k-{job.id}")
    now = timezone.now()
    return Task.objects.create(
        attempt=attempt,
        role="main",
        index=0,
        state=state,
        started_at=now if started else None,
        completed_at=now if ended else None,
    )


def test_metrics_count_jobs_by_virtual_cluster_and_state_after_submissions(alice, admin):
    VirtualCluster.objects.create(name="research", open_to_all=True)
    waiting = lifecycle.submit(alice, hello_job("a"))
    lifecycle.submit(admin, hello_job("b"), virtual_cluster="research")
    running = lifecycle.submit(alice, hello_job("c"), virtual_cluster="research")
    done = lifecycle.submit(admin, hello_job("d"))
    Job.objects.filter(id=running.id).update(state="RUNNING", gpu_count=2)
    Job.objects.filter(id=done.id).update(state="SUCCEEDED")
    # The oldest waiting job of the default VC was submitted ten minutes ago.
    Job.objects.filter(id=waiting.id).update(created_at=timezone.now() - timedelta(minutes=10))
    with_task(running, "RUNNING", started=True, ended=False)
    with_task(done, "SUCCEEDED", started=True, ended=True)
    default = waiting.virtual_cluster.name

    metrics = scrape()

    jobs = metrics["portal_jobs"]
    assert jobs[vc_state(default, "WAITING")] == 1
    assert jobs[vc_state(default, "SUCCEEDED")] == 1
    assert jobs[vc_state("research", "WAITING")] == 1
    assert jobs[vc_state("research", "RUNNING")] == 1
    assert jobs[vc_state("research", "FAILED")] == 0  # every state, so a graph starts at 0
    assert metrics["portal_jobs_waiting"][(("virtual_cluster", default),)] == 1
    age = metrics["portal_oldest_waiting_job_age_seconds"]
    assert 600 <= age[(("virtual_cluster", default),)] < 660
    assert 0 <= age[(("virtual_cluster", "research"),)] < 60
    assert metrics["portal_job_gpus"][vc_state("research", "RUNNING")] == 2
    assert metrics["portal_tasks"][(("state", "RUNNING"),)] == 1
    assert metrics["portal_tasks"][(("state", "SUCCEEDED"),)] == 1
    assert metrics["portal_tasks"][(("state", "FAILED"),)] == 0
    assert metrics["portal_tasks_started"][()] == 2
    assert metrics["portal_tasks_ended"][()] == 1


def test_metrics_name_no_job_or_user_only_virtual_clusters_and_states(alice):
    lifecycle.submit(alice, hello_job("secret-project", secrets="{token: hunter2}"))
    body = Client().get("/metrics").content.decode()
    assert "secret-project" not in body
    assert "alice" not in body
    assert "hunter2" not in body
    labels = {name for name in re.findall(r"[{,](\w+)=", body)}
    assert labels <= {"virtual_cluster", "state", "method", "route", "le"}


def test_metrics_say_how_long_since_the_last_reconcile_pass(settings, alice):
    with redis.Redis.from_url(settings.REDIS_URL) as client:
        client.set(LAST_RUN_KEY, time.time() - 120)
    settings.SCHEDULER_LATE_SECONDS = 90
    metrics = scrape()
    assert 120 <= metrics["portal_reconcile_last_pass_age_seconds"][()] < 180
    assert metrics["portal_reconcile_ever_ran"][()] == 1
    assert metrics["portal_scheduler_late"][()] == 1
    assert metrics["portal_redis_up"][()] == 1


def test_metrics_say_redis_is_down_instead_of_failing(settings, alice):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    metrics = scrape()
    assert metrics["portal_redis_up"][()] == 0
    assert "portal_reconcile_last_pass_age_seconds" not in metrics
    assert "portal_jobs" in metrics  # the database's part still answers


def test_metrics_say_how_old_the_capacity_refresh_is(alice):
    Node.objects.all().delete()
    Node.objects.create(name="n1", cpu=8, memory_mb=1024)
    Node.objects.filter(name="n1").update(updated_at=timezone.now() - timedelta(minutes=5))
    metrics = scrape()
    assert metrics["portal_nodes"][()] == 1
    assert 300 <= metrics["portal_nodes_refresh_age_seconds"][()] < 360


def test_metrics_answer_openmetrics_to_a_scraper_that_asks_for_it(alice):
    response = Client().get("/metrics", HTTP_ACCEPT="application/openmetrics-text; version=1.0.0")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/openmetrics-text")
    assert response.content.decode().endswith("# EOF\n")


def test_metrics_refuse_a_client_outside_the_allowed_networks(settings):
    settings.METRICS_ALLOWED_NETWORKS = ["127.0.0.1/32", "::1/128"]
    response = Client().get("/metrics", REMOTE_ADDR="203.0.113.7")
    assert response.status_code == 403
    assert response.json()["code"] == "Forbidden"
    assert "METRICS_ALLOWED_NETWORKS" in response.json()["message"]


def test_metrics_admit_a_client_of_an_allowed_network(settings, db):
    settings.METRICS_ALLOWED_NETWORKS = ["10.0.0.0/8"]
    assert Client().get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert Client().get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 403
    # An IPv4 client seen on an IPv6 socket (::ffff:10.1.2.3) is the IPv4 client.
    assert Client().get("/metrics", REMOTE_ADDR="::ffff:10.1.2.3").status_code == 200


def test_metrics_with_a_token_set_refuse_a_request_without_it(settings, db):
    settings.METRICS_TOKEN = "s3cret-metrics"
    for headers in ({}, {"HTTP_AUTHORIZATION": "Bearer wrong"}, {"HTTP_AUTHORIZATION": "s3cret"}):
        response = Client().get("/metrics", **headers)
        assert response.status_code == 403
        assert "METRICS_TOKEN" in response.json()["message"]
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-metrics").status_code == 200


def test_metrics_with_a_token_still_need_an_allowed_network(settings, db):
    settings.METRICS_TOKEN = "s3cret-metrics"
    response = Client().get(
        "/metrics", REMOTE_ADDR="203.0.113.7", HTTP_AUTHORIZATION="Bearer s3cret-metrics"
    )
    assert response.status_code == 403
    assert "METRICS_ALLOWED_NETWORKS" in response.json()["message"]


def settings_of(**env: str) -> subprocess.CompletedProcess[str]:
    """portal.settings as a fresh process with ``env`` reads it: its METRICS_* values."""
    code = "from portal import settings as s; print(s.METRICS_TOKEN, s.METRICS_ALLOWED_NETWORKS)"
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        check=False,
    )


def test_metrics_token_may_come_from_a_file(tmp_path):
    secret = tmp_path / "metrics-token"
    secret.write_text("from-a-file\n")
    result = settings_of(METRICS_TOKEN_FILE=str(secret))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == "from-a-file"


def test_a_bad_allowed_network_stops_the_portal_at_start_naming_the_setting():
    result = settings_of(METRICS_ALLOWED_NETWORKS="10.0.0.0/8,not-a-network")
    assert result.returncode != 0
    assert "METRICS_ALLOWED_NETWORKS" in result.stderr
    assert "not-a-network" in result.stderr


def test_metrics_cost_the_same_queries_for_many_jobs_as_for_one(alice):
    job = lifecycle.submit(alice, hello_job("first"))
    with_task(job, "RUNNING", started=True, ended=False)
    with CaptureQueriesContext(connection) as one:
        scrape()
    # More virtual clusters, jobs and tasks: still the same queries.
    VirtualCluster.objects.create(name="research", open_to_all=True)
    for n in range(12):
        more = lifecycle.submit(alice, hello_job(f"more-{n}"), virtual_cluster="research")
        with_task(more, "SUCCEEDED", started=True, ended=True)
    with CaptureQueriesContext(connection) as many:
        scrape()
    assert len(many) == len(one) == QUERIES_PER_SCRAPE


def test_the_grafana_dashboard_reads_only_metrics_the_endpoint_exports(alice):
    job = lifecycle.submit(alice, hello_job("one"))
    with_task(job, "RUNNING", started=True, ended=False)
    Node.objects.get_or_create(name="n1")
    client = Client()
    client.force_login(alice)
    assert client.get("/api/v2/jobs").status_code == 200  # the latency histogram has samples
    body = Client().get("/metrics").content.decode()
    exported = set(scrape()) | {name for name, _ in samples_named(body)}
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["__inputs"][0]["name"] == "DS_PROMETHEUS"
    exprs = [
        (panel["title"], target["expr"])
        for panel in dashboard["panels"]
        for target in panel["targets"]
    ]
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}", panel["title"]
        assert panel["targets"], panel["title"]
    for variable in dashboard["templating"]["list"]:
        exprs.append((variable["name"], variable["definition"]))
    for title, expr in exprs:
        names = set(re.findall(r"\bportal_\w+", expr))
        assert names, f"{title}: {expr} reads no portal metric"
        assert names <= exported, f"{title}: {names - exported} not exported"
    titles = " ".join(panel["title"] for panel in dashboard["panels"]).lower()
    for topic in (
        "jobs by state",
        "waiting jobs per",
        "oldest waiting",
        "running tasks",
        "pass",
        "api latency",
        "backend errors",
    ):
        assert topic in titles


def samples_named(body: str) -> dict[tuple[str, tuple], float]:
    """Every sample by its own name (``x_count``, ``x_sum``, ``x_bucket``) and sorted labels."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
    }


def test_metrics_time_the_api_by_route_not_by_path(alice):
    client = Client()
    client.force_login(alice)
    route = (("method", "GET"), ("route", "api/v2/jobs/<username:username>~<str:name>"))
    count = ("portal_api_request_duration_seconds_count", route)
    before = samples_named(Client().get("/metrics").content.decode()).get(count, 0)
    job = lifecycle.submit(alice, hello_job("timed"))
    for _ in range(3):
        assert client.get(f"/api/v2/jobs/alice~{job.name}").status_code == 200
    client.get("/jobs/")  # a page: not the API's
    after = samples_named(Client().get("/metrics").content.decode())
    assert after[count] == before + 3
    assert after[("portal_api_request_duration_seconds_sum", route)] > 0
    assert not any(
        "timed" in value for _, labels in after for _, value in labels
    )  # no label holds the path
