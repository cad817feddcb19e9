"""``GET /metrics``: the portal's state for Prometheus, in its text format (issue 28).

A custom collector reads the database and Redis at each scrape, not counters kept in memory:
the portal runs as several uvicorn worker processes and Celery workers, and any of them may answer a
scrape, so only what they all share (the rows, the last pass's time) gives one answer. Each
scrape costs a fixed number of aggregate queries however many jobs there are
(``QUERIES_PER_SCRAPE``). No label holds a job's or user's name: only virtual clusters' names
and states, which every admin sees anyway and whose number is small.

The API's request latency is the one figure kept per process, in a histogram each web process
adds to as it answers: where several serve (runportal), ``PROMETHEUS_MULTIPROC_DIR`` makes
prometheus_client keep each process's counts in a file there, and a scrape adds them up (its
multiprocess mode; uvicorn's workers inherit it from runportal); one process alone (the image's
uvicorn) keeps them in memory.
"""

from __future__ import annotations

import functools
import hmac
import ipaddress
import os
import time
from collections.abc import Callable, Iterator

import redis
from django.conf import settings
from django.db.models import Count, Max, Min, Q, Sum
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_GET
from prometheus_client import Histogram
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector, CollectorRegistry

from clusters.models import Node, VirtualCluster
from jobs.models import Job, Task
from jobs.states import LIVE_JOB_STATES, JobState, TaskState
from jobs.wakeup import pass_figures, seconds_since_last_pass

QUERIES_PER_SCRAPE = 4  # virtual clusters, jobs, tasks, nodes


class PortalCollector(Collector):
    """The jobs, tasks, nodes and reconcile loop of the portal as they are now."""

    def collect(self) -> Iterator[Metric]:
        yield from self.job_metrics()
        yield from self.task_metrics()
        yield from self.node_metrics()
        yield from self.scheduler_metrics()

    def job_metrics(self) -> Iterator[Metric]:
        vcs = list(VirtualCluster.objects.order_by("name").values_list("name", flat=True))
        rows = Job.objects.values("virtual_cluster__name", "state").annotate(
            n=Count("id"), gpus=Sum("gpu_count"), oldest=Min("created_at")
        )
        counts = {(vc, state): 0 for vc in vcs for state in JobState.values}
        gpus = {(vc, state): 0 for vc in vcs for state in LIVE_JOB_STATES}
        oldest = {}
        for row in rows:
            key = (row["virtual_cluster__name"], row["state"])
            counts[key] = row["n"]
            if row["state"] in LIVE_JOB_STATES:
                gpus[key] = row["gpus"] or 0
            if row["state"] == JobState.WAITING:
                oldest[row["virtual_cluster__name"]] = row["oldest"]
        jobs = GaugeMetricFamily(
            "portal_jobs",
            "Jobs by virtual cluster and state (ended ones until an admin deletes them).",
            labels=["virtual_cluster", "state"],
        )
        for (vc, state), n in sorted(counts.items()):
            jobs.add_metric([vc, state], n)
        yield jobs
        waiting = GaugeMetricFamily(
            "portal_jobs_waiting",
            "Jobs waiting to start, by virtual cluster (admission, quota or capacity).",
            labels=["virtual_cluster"],
        )
        for vc in sorted({vc for vc, _ in counts}):
            waiting.add_metric([vc], counts[(vc, JobState.WAITING)])
        yield waiting
        # The same age as GET /api/v2/alerts' "job waiting long" (jobs.alerts): since submission.
        now = timezone.now()
        age = GaugeMetricFamily(
            "portal_oldest_waiting_job_age_seconds",
            "Seconds since the oldest waiting job of the virtual cluster was submitted "
            "(0 when none waits).",
            labels=["virtual_cluster"],
        )
        for vc in sorted({vc for vc, _ in counts}):
            since = oldest.get(vc)
            age.add_metric([vc], max(0.0, (now - since).total_seconds()) if since else 0.0)
        yield age
        gpu = GaugeMetricFamily(
            "portal_job_gpus",
            "GPUs asked for by the live jobs, by virtual cluster and state.",
            labels=["virtual_cluster", "state"],
        )
        for (vc, state), n in sorted(gpus.items()):
            gpu.add_metric([vc, state], n)
        yield gpu

    def task_metrics(self) -> Iterator[Metric]:
        rows = Task.objects.values("state").annotate(
            n=Count("id"),
            started=Count("id", filter=Q(started_at__isnull=False)),
            ended=Count("id", filter=Q(completed_at__isnull=False)),
        )
        counts = dict.fromkeys(TaskState.values, 0)
        started = ended = 0
        for row in rows:
            counts[row["state"]] = row["n"]
            started += row["started"]
            ended += row["ended"]
        tasks = GaugeMetricFamily(
            "portal_tasks", "Tasks of every attempt by state.", labels=["state"]
        )
        for state, n in sorted(counts.items()):
            tasks.add_metric([state], n)
        yield tasks
        # Gauges, not counters: an admin deleting ended jobs lowers them, which a counter's
        # rate() would read as a reset. delta() or deriv() over them gives the starts and ends.
        yield GaugeMetricFamily(
            "portal_tasks_started",
            "Tasks that have ever started running (of the jobs still kept).",
            value=started,
        )
        yield GaugeMetricFamily(
            "portal_tasks_ended", "Tasks that have ended (of the jobs still kept).", value=ended
        )

    def node_metrics(self) -> Iterator[Metric]:
        nodes = Node.objects.aggregate(n=Count("id"), seen=Max("updated_at"))
        yield GaugeMetricFamily(
            "portal_nodes", "Nodes the last capacity refresh saw.", value=nodes["n"]
        )
        # Beat refreshes the nodes every 60 s; one unreachable backend stops the refresh.
        if nodes["seen"] is not None:
            yield GaugeMetricFamily(
                "portal_nodes_refresh_age_seconds",
                "Seconds since the backend last reported its nodes (beat asks every 60 s).",
                value=max(0.0, (timezone.now() - nodes["seen"]).total_seconds()),
            )

    def scheduler_metrics(self) -> Iterator[Metric]:
        try:
            age, ever_ran = seconds_since_last_pass()
            passes, pass_seconds, backend_errors = pass_figures()
        except redis.exceptions.RedisError:
            yield GaugeMetricFamily("portal_redis_up", "Whether Redis answered.", value=0)
            return
        yield GaugeMetricFamily("portal_redis_up", "Whether Redis answered.", value=1)
        yield GaugeMetricFamily(
            "portal_reconcile_last_pass_age_seconds",
            "Seconds since the last reconcile pass ended (before any: since the portal was "
            "first asked).",
            value=age,
        )
        yield GaugeMetricFamily(
            "portal_reconcile_ever_ran",
            "1 once a reconcile pass has ended since Redis started, else 0.",
            value=1 if ever_ran else 0,
        )
        yield GaugeMetricFamily(
            "portal_scheduler_late",
            "1 when pages show the 'scheduler has not run' banner (SCHEDULER_LATE_SECONDS).",
            value=1 if age >= settings.SCHEDULER_LATE_SECONDS else 0,
        )
        # Kept in Redis by the passes, whichever worker ran them (since Redis started).
        yield SummaryMetricFamily(
            "portal_reconcile_pass_seconds",
            "Reconcile passes ended and the seconds they took.",
            count_value=passes,
            sum_value=pass_seconds,
        )
        yield CounterMetricFamily(
            "portal_backend_errors",
            "Reconcile passes the backend failed (it did not answer, or kept refusing).",
            value=backend_errors,
        )


REGISTRY = CollectorRegistry()
REGISTRY.register(PortalCollector())
API_SECONDS = Histogram(
    "portal_api_request_duration_seconds",
    "Seconds the API took to answer (until its response started), by method and route.",
    ["method", "route"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
    registry=REGISTRY,
)
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
API_ROOTS = ("/api/v1/", "/api/v2/")


class ApiLatencyMiddleware:
    """Times every API request Django resolved to a route (its pattern, not its path: a label
    per job would grow without end); other methods are counted as ``other``."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        match = request.resolver_match
        if match is not None and request.path_info.startswith(API_ROOTS):
            method = request.method if request.method in METHODS else "other"
            API_SECONDS.labels(method, match.route).observe(time.perf_counter() - started)
        return response


def scrape_registry() -> CollectorRegistry:
    """Every web process's latency (multiprocess mode) with the shared state, or this one's."""
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return REGISTRY
    registry = CollectorRegistry()
    MultiProcessCollector(registry)
    registry.register(PortalCollector())
    return registry


@functools.cache
def networks(cidrs: tuple[str, ...]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(cidr, strict=False) for cidr in cidrs)


def refusal(request: HttpRequest) -> str | None:
    """Why this request may not read the metrics, or None."""
    try:
        client = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        client = None
    if isinstance(client, ipaddress.IPv6Address) and client.ipv4_mapped:
        client = client.ipv4_mapped
    allowed = networks(tuple(settings.METRICS_ALLOWED_NETWORKS))
    if client is None or not any(client in network for network in allowed):
        return f"client address: not in METRICS_ALLOWED_NETWORKS ({', '.join(map(str, allowed))})"
    token = settings.METRICS_TOKEN
    if token:
        scheme, _, sent = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            sent.strip().encode(), token.encode()
        ):
            return "Authorization: must be 'Bearer <METRICS_TOKEN>'"
    return None


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """The metrics in the format the scraper asks for (Prometheus text, or OpenMetrics)."""
    reason = refusal(request)
    if reason is not None:
        return JsonResponse({"code": "Forbidden", "message": reason}, status=403)
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    body = encoder(scrape_registry())
    response = HttpResponse(body, content_type=content_type)
    response["Cache-Control"] = "no-store"
    return response
