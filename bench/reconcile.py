"""One reconcile pass over 10,000 live tasks on the Kubernetes backend: its time and SQL queries.

A fake API server on loopback (tests/support/fake_apiserver.py) answers the pod list; PostgreSQL
holds the jobs, in a fresh database ``bench_reconcile`` of the server at ``BENCH_PG`` (default the
local one). Each job has one role of 10 running tasks. The pass is measured at 1,000 and 10,000
tasks, in the steady state (nothing changed) and with 1% of the tasks just finished, to show
which queries grow with the number of tasks. The news a pass publishes goes through the real
channel layer (channels-redis on ``BENCH_REDIS``), as in production. Prints the figures, the
headline last.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
os.environ.update(
    DATABASE_URL=f"{PG}/bench_reconcile",
    REDIS_URL=os.environ.get("BENCH_REDIS", "redis://127.0.0.1:6379/14"),
    PORTAL_VAR_DIR=os.environ.get(
        "BENCH_VAR_DIR", os.path.join(tempfile.gettempdir(), "bench_reconcile_var")
    ),
    DJANGO_SETTINGS_MODULE="portal.settings",
    LOG_LEVEL="WARNING",
)
sys.path[:0] = [str(ROOT)]
PER_JOB = 10
JOB = """protocolVersion: 2
name: bench
type: job
prerequisites: [{name: img, type: dockerimage, uri: python}]
taskRoles:
  worker:
    instances: 10
    dockerImage: img
    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0, ports: {http: 1}}
    commands: ["echo hello"]
"""


def setup_django() -> None:
    for sql in ("DROP DATABASE IF EXISTS bench_reconcile", "CREATE DATABASE bench_reconcile"):
        subprocess.run(["psql", f"{PG}/postgres", "-qc", sql], check=True)  # noqa: S607
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def populate(cluster: object, tasks: int) -> None:
    """``tasks`` running tasks in the database, and their running pods in the fake cluster."""
    from django.contrib.auth.models import User
    from django.utils import timezone

    from clusters.backends.kubernetes import manifests as m
    from clusters.models import VirtualCluster
    from jobs.models import Job, JobAttempt, Task
    from jobs.protocol import load_job

    Job.objects.all().delete()
    user, _ = User.objects.get_or_create(username="alice")
    vc, _ = VirtualCluster.objects.get_or_create(name="default")
    protocol = load_job(JOB).job
    now = timezone.now()
    jobs = Job.objects.bulk_create(
        Job(owner=user, name=f"bench-{i}", virtual_cluster=vc, submitted_text=JOB,
            protocol=protocol, state="RUNNING", started_at=now, task_count=PER_JOB)
        for i in range(tasks // PER_JOB)
    )  # fmt: skip
    attempts = JobAttempt.objects.bulk_create(
        JobAttempt(job=job, number=0, key=f"job{job.id}-a0", created_at=now) for job in jobs
    )
    rows = []
    for attempt in attempts:
        for index in range(PER_JOB):
            name = m.pod_name(attempt.key, f"worker-{index}", 0)
            ip, node = f"10.{attempt.id % 250}.{index}.{attempt.id // 250 % 250}", "node-1"
            rows.append(Task(attempt=attempt, role="worker", index=index, state="RUNNING",
                             ip=ip, node=node, ports={"http": [20000]}, started_at=now,
                             backend_ref=f"{attempt.key}/{name}"))  # fmt: skip
            cluster.put_pod(pod_of(attempt.key, name, ip, node))  # type: ignore[attr-defined]
    Task.objects.bulk_create(rows, batch_size=2000)


def pod_of(key: str, name: str, ip: str, node: str) -> dict[str, object]:
    from clusters.backends.kubernetes import manifests as m

    state = {"running": {"startedAt": "2026-01-02T03:04:05Z"}}
    return {
        "metadata": {"name": name, "labels": m.labels(key)},
        "spec": {"nodeName": node},
        "status": {"phase": "Running", "podIP": ip,
                   "containerStatuses": [{"name": "main", "state": state}]},
    }  # fmt: skip


def finish_some(cluster: object, share: float) -> int:
    pods = list(cluster.pods().values())  # type: ignore[attr-defined]
    chosen = pods[:: int(1 / share)]
    for pod in chosen:
        state = {"terminated": {"exitCode": 0, "reason": "Completed",
                                "finishedAt": "2026-01-02T04:04:05Z"}}  # fmt: skip
        pod["status"] = {"phase": "Succeeded", "containerStatuses": [{"name": "main",
                                                                      "state": state}]}  # fmt: skip
    return len(chosen)


class Timed:
    """The backend, counting the seconds its ``observe`` takes (list, parse, mapping)."""

    def __init__(self, backend: object) -> None:
        self.backend, self.observe_seconds = backend, 0.0

    def observe(self, refs: list[str]) -> object:
        start = time.perf_counter()
        try:
            return self.backend.observe(refs)  # type: ignore[attr-defined]
        finally:
            self.observe_seconds += time.perf_counter() - start

    def __getattr__(self, name: str) -> object:
        return getattr(self.backend, name)


def measure(backend: object) -> tuple[float, list[str]]:
    from django.db import connection

    from bench._queries import recorded
    from jobs.lifecycle.passes import run_pass

    with recorded(connection) as statements:
        start = time.perf_counter()
        run_pass(backend)  # type: ignore[arg-type]
        seconds = time.perf_counter() - start
    return seconds, statements


def kind(sql: str) -> str:
    words = sql.split()
    table = next((w for w in words if w.startswith('"jobs_') or w.startswith('"clusters_')), "")
    return f"{words[0]} {table.split('.')[0]}"


def main() -> None:
    setup_django()
    from collections import Counter

    from kubernetes import client

    from clusters.backends.kubernetes.api import api_client_for
    from clusters.backends.kubernetes.backend import KubernetesBackend
    from tests.support.fake_apiserver import serve

    steady: dict[int, tuple[float, int]] = {}
    for tasks in (1_000, 10_000):
        with serve() as (url, cluster):
            backend = Timed(KubernetesBackend(api_client_for(client.Configuration(host=url))))
            populate(cluster, tasks)
            measure(backend)  # warm the connection and the caches once
            backend.observe_seconds = 0.0
            seconds, sql = measure(backend)
            in_backend = backend.observe_seconds
            steady[tasks] = (seconds, len(sql))
            lists = cluster.requests[("GET", "/api/v1/namespaces/default/pods")]
            print(f"{tasks:>6} live tasks, steady pass: {seconds:.3f} s ({in_backend:.3f} s in "
                  f"the backend's observe), {len(sql)} SQL queries, "
                  f"{lists // 2} pod list call(s) per pass")  # fmt: skip
            changed = finish_some(cluster, 0.01)
            seconds, sql = measure(backend)
            growth = Counter(kind(q) for q in sql).most_common(4)
            print(f"{tasks:>6} live tasks, {changed} just finished: {seconds:.3f} s, "
                  f"{len(sql)} SQL queries; most frequent: {growth}")  # fmt: skip
    same = steady[1_000][1] == steady[10_000][1]
    print(f"steady-state queries 1,000 vs 10,000 tasks: {steady[1_000][1]} vs "
          f"{steady[10_000][1]} ({'constant' if same else 'GROWS'})")  # fmt: skip
    print(f"one reconcile pass over 10,000 live tasks: {steady[10_000][0]:.3f} s")


if __name__ == "__main__":
    main()
