"""One admission pass over 10,000 waiting jobs in 100 virtual clusters on 1,000 nodes (PostgreSQL).

Creates a fresh database ``bench_admission`` (or ``BENCH_DB``) at ``BENCH_PG`` (default the
local PostgreSQL), fills it with waiting jobs spread over 100 virtual clusters on 1,000 nodes
of 8 GPUs, and times one pass of ``jobs.lifecycle.admit.plan_and_apply`` (which starts up to
``MAX_ADMIT`` jobs) with a backend that places without running anything. Runs at 1,000 and
at 10,000 jobs to show that the query count does not grow with the number of jobs. Prints the
figures, the headline last.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
DB = os.environ.get("BENCH_DB", "bench_admission")  # another name for runs side by side
VCS = 100
NODES = 1_000


def setup_django() -> None:
    subprocess.run(["psql", f"{PG}/postgres", "-qc", f"DROP DATABASE IF EXISTS {DB}"], check=True)
    subprocess.run(["psql", f"{PG}/postgres", "-qc", f"CREATE DATABASE {DB}"], check=True)
    os.environ["DATABASE_URL"] = f"{PG}/{DB}"
    os.environ.setdefault("PORTAL_VAR_DIR", str(ROOT / "var" / DB))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


class PlacingBackend:
    """Places tasks on made-up addresses; nothing runs."""

    name = "bench"

    def place(self, attempt_key: str, shapes: list) -> list:
        from clusters.backends.base import Placement

        return [Placement("10.0.0.1", {}) for _ in shapes]


class Report:
    def __init__(self) -> None:
        self.admitted = 0
        self.touched_jobs: set[int] = set()
        self.touched_queues: set[str] = set()


def fill(jobs: int) -> None:
    from django.contrib.auth.models import User
    from django.utils import timezone

    from clusters.models import Node, VirtualCluster
    from jobs.models import Job

    Job.objects.all().delete()
    VirtualCluster.objects.exclude(name="default").delete()
    Node.objects.all().delete()
    Node.objects.bulk_create(
        Node(name=f"n{i:04d}", cpu=16, memory_mb=64_000, gpus={"V100": 8}) for i in range(NODES)
    )
    user, _ = User.objects.get_or_create(username="bench")
    vcs = VirtualCluster.objects.bulk_create(
        VirtualCluster(
            name=f"vc{i:02d}", cpu=16, memory_mb=64_000, gpus={"V100": 8}, strict_fifo=i % 4 == 0
        )
        for i in range(VCS)
    )
    protocol = {
        "name": "x",
        "taskRoles": {
            "w": {"instances": 1, "resourcePerInstance": {"cpu": 1, "memoryMB": 1000, "gpu": 1}}
        },
    }
    start = timezone.now() - timedelta(days=1)
    rows = []
    for i in range(jobs):
        vc = vcs[i % VCS]
        gpus = 1 + (i // VCS) % 3  # 1, 2 or 3 GPUs: the first few per VC fit, the rest wait
        rows.append(
            Job(
                owner=user,
                name=f"job{i}",
                virtual_cluster=vc,
                submitted_text="",
                protocol=protocol,
                task_count=1,
                gpu_count=gpus,
                resources={
                    "cpu": 1,
                    "memoryMB": 1000,
                    "gpus": {"V100": gpus},
                    "tasks": [["w", 1, {"cpu": 1, "memoryMB": 1000, "gpus": {"V100": gpus}}]],
                },
                priority=i % 3,
                created_at=start + timedelta(seconds=i),
            )
        )
    Job.objects.bulk_create(rows, batch_size=2000)


def timed_pass() -> tuple[float, int, int]:
    from django.db import connection

    from bench._queries import recorded
    from jobs import news
    from jobs.lifecycle.admit import plan_and_apply

    report = Report()
    with recorded(connection) as queries:
        began = time.perf_counter()
        with news.gathered() as changed:  # as in a reconcile pass: news sent at the end
            plan_and_apply(PlacingBackend(), report)  # type: ignore[arg-type]
            changed.jobs.update(report.touched_jobs)
            changed.queues.update(report.touched_queues)
        took = time.perf_counter() - began
    return took, len(queries), report.admitted


def main() -> None:
    setup_django()
    first: dict[int, tuple[float, int, int]] = {}
    again: dict[int, tuple[float, int, int]] = {}
    fill(0)
    timed_pass()  # no jobs yet: imports what a pass uses, as a running worker has
    for n in (1_000, 10_000):
        fill(n)
        first[n] = timed_pass()  # writes every waiting job's reason and position
        again[n] = timed_pass()  # the steady state: only what changed is written
    for n in (1_000, 10_000):
        for label, (took, count, admitted) in (("first", first[n]), ("next", again[n])):
            print(
                f"{n:>6,} waiting jobs, {VCS} VCs, {label} pass: {took:.3f} s, "
                f"{count} queries, {admitted} admitted"
            )
    took, count, _ = first[10_000]
    print(f"admission pass, 10,000 waiting jobs in {VCS} VCs: {took:.3f} s, {count} queries")


if __name__ == "__main__":
    main()
