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
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]
from bench._kubernetes import populate_running, setup_django, use_own_databases  # noqa: E402

DATABASE = os.environ.get("BENCH_DB", "bench_reconcile")  # another name for runs side by side
use_own_databases(DATABASE, redis_db=14)
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
    setup_django(DATABASE)
    from collections import Counter

    from kubernetes import client

    from backends.kubernetes.api import api_client_for
    from backends.kubernetes.backend import KubernetesBackend
    from jobs.models import Job
    from tests.support.fake_apiserver import serve

    steady: dict[int, tuple[float, int]] = {}
    for tasks in (1_000, 10_000):
        with serve() as (url, cluster):
            backend = Timed(KubernetesBackend(api_client_for(client.Configuration(host=url))))
            Job.objects.all().delete()
            populate_running(
                cluster, JOB, tasks, owner="alice", prefix="bench", ports={"http": [20000]}
            )
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
