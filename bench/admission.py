"""One admission pass over 10,000 waiting jobs in 100 virtual clusters on 1,000 nodes (PostgreSQL).

Creates a fresh database ``bench_admission`` (or ``BENCH_DB``) at ``BENCH_PG`` (default the
local PostgreSQL), fills it with waiting jobs spread over 100 virtual clusters on 1,000 nodes
of 8 GPUs, and times one pass of ``jobs.lifecycle.admit.plan_and_apply`` (which starts up to
``MAX_ADMIT`` jobs) with a backend that places without running anything. Runs at 1,000 and
at 10,000 jobs to show that the query count does not grow with the number of jobs. Prints the
figures, the headline last.
"""

from __future__ import annotations

import gc
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
    gc.freeze()  # as a worker process does when it starts (portal.celery)


class PlacingBackend:
    """Places tasks on made-up addresses; nothing runs."""

    name = "bench"

    def place(self, attempt_key: str, shapes: list) -> list:
        from backends.base import Placement

        return [Placement("10.0.0.1", {}) for _ in shapes]


GPUS_PER_NODE = 8
ROUNDS = 9  # passes after jobs ended, one after another
RUNNING_PER_VC = 40  # of 2 GPUs each: every VC's guarantee (80 GPUs) in use, the cluster full


def demand(gpus: int) -> dict:
    per = {"cpu": 1, "memoryMB": 1000, "gpus": {"V100": gpus}}
    return {**per, "tasks": [["w", 1, per]]}


def fill(jobs: int) -> None:
    """``jobs`` waiting in ``VCS`` VCs whose guarantees add up to the ``NODES`` nodes, each VC's
    guarantee held by its running jobs (each task on a node): a full cluster, as it is when
    thousands of jobs wait."""
    from django.contrib.auth.models import User
    from django.db import connection
    from django.utils import timezone

    from clusters.models import Node, VirtualCluster
    from jobs.models import Job, JobAttempt, Task

    Job.objects.all().delete()
    VirtualCluster.objects.exclude(name="default").delete()
    Node.objects.all().delete()
    nodes = Node.objects.bulk_create(
        Node(name=f"n{i:04d}", cpu=16, memory_mb=64_000, gpus={"V100": GPUS_PER_NODE})
        for i in range(NODES)
    )
    users = [User.objects.get_or_create(username=f"bench{i}")[0] for i in range(4)]
    share = NODES // VCS
    vcs = VirtualCluster.objects.bulk_create(
        VirtualCluster(
            name=f"vc{i:02d}",
            cpu=16 * share,
            memory_mb=64_000 * share,
            gpus={"V100": GPUS_PER_NODE * share},
            strict_fifo=i % 4 == 0,
            max_capacity=0 if i % 2 else 100,
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

    def job(i: int, vc: object, gpus: int, **state: object) -> Job:
        return Job(
            owner=users[i % len(users)],
            name=f"job{i}",
            virtual_cluster=vc,
            submitted_text="",
            protocol=protocol,
            task_count=1,
            gpu_count=gpus,
            resources=demand(gpus),
            priority=i % 3,
            created_at=start + timedelta(seconds=i),
            **state,
        )

    running = Job.objects.bulk_create(
        job(-1 - n, vc, 2, state="RUNNING", started_at=start)
        for v, vc in enumerate(vcs)
        for n in range(v * RUNNING_PER_VC, (v + 1) * RUNNING_PER_VC)
    )
    attempts = JobAttempt.objects.bulk_create(
        JobAttempt(job=r, number=0, key=f"bench-{r.id}") for r in running
    )
    Task.objects.bulk_create(
        Task(attempt=a, role="w", index=0, state="RUNNING", node=nodes[n // 4].name)
        for n, a in enumerate(attempts)  # four 2-GPU tasks fill a node
    )
    waiting = []
    for i in range(jobs):
        gpus = 1 + (i // VCS) % 3  # 1, 2 or 3 GPUs
        waiting.append(job(i, vcs[i % VCS], gpus))
    Job.objects.bulk_create(waiting, batch_size=2000)
    with connection.cursor() as cursor:  # as autovacuum does after a load of this size
        cursor.execute("VACUUM ANALYZE jobs_job")
        cursor.execute("VACUUM ANALYZE jobs_task")


def schedule_started() -> None:
    """The tasks the last pass started land on nodes, best fit, as Kubernetes' scheduler would
    put them and the portal's observation of their pods records (without it, every pass would
    place each of them again, and more each round)."""
    from clusters.capacity import node_capacities
    from clusters.placement import place, take
    from clusters.resources import Resources
    from jobs.models import Task

    live = Task.objects.filter(state__in=["WAITING", "RUNNING"])
    free = node_capacities()
    rows = live.values_list("id", "node", "attempt__job__gpu_count")
    started = []
    for task_id, node, gpus in rows:
        per = Resources(1, 1000, {"V100": gpus})
        if node:
            free[node] = free[node] - per
        else:
            started.append((task_id, per))
    for task_id, per in started:
        use = place([("w", 1, per)], free)
        if use:
            take(free, use)
            Task.objects.filter(id=task_id).update(node=next(iter(use)))


def end_some(count: int) -> None:
    """The tasks started since the last round are on nodes, and ``count`` running jobs end
    (in as many VCs), as between two passes."""
    from jobs.models import Job, Task

    schedule_started()

    ended = list(
        Job.objects.filter(state="RUNNING")
        .order_by("virtual_cluster_id", "id")
        .distinct("virtual_cluster_id")
        .values_list("id", flat=True)[:count]
    )
    Job.objects.filter(id__in=ended).update(state="SUCCEEDED")
    Task.objects.filter(attempt__job_id__in=ended).update(state="SUCCEEDED")


def timed_pass(standing: bool = True) -> tuple[float, int, int]:
    from django.db import connection

    from bench._queries import recorded
    from jobs import news
    from jobs.lifecycle.admit import plan_and_apply
    from jobs.lifecycle.report import PassReport

    report = PassReport()
    with recorded(connection) as queries:
        began = time.perf_counter()
        with news.gathered() as changed:  # as in a reconcile pass: news sent at the end
            plan_and_apply(PlacingBackend(), report, standing)  # type: ignore[arg-type]
            changed.jobs.update(report.touched_jobs)
            changed.queues.update(report.touched_queues)
        took = time.perf_counter() - began
    return took, len(queries), report.admitted


def main() -> None:
    setup_django()
    figures: dict[str, tuple[float, int, int]] = {}
    fill(0)
    timed_pass()  # no jobs yet: imports what a pass uses, as a running worker has
    for n in (1_000, 10_000):
        fill(n)
        figures[f"{n:,} first"] = timed_pass()  # writes every waiting job's reason and position
        figures[f"{n:,} unchanged"] = timed_pass()  # nothing changed since
        # The steady state, round after round: room for a few, the cluster more fragmented
        # each time (a pass whose placement tried every node for each job took 9 s by the
        # fifth round). The median of ROUNDS, and the slowest.
        rounds = []
        for _ in range(ROUNDS):
            end_some(5)
            rounds.append(timed_pass())
        rounds.sort()
        figures[f"{n:,} after 5 ends"] = rounds[len(rounds) // 2]
        figures[f"{n:,} slowest round"] = rounds[-1]
        # A wake-up as jobs end one after another: where waiting jobs stand is written by at
        # most one pass a second (jobs.lifecycle.admit), the others only start and preempt.
        rounds = []
        for _ in range(ROUNDS):
            end_some(5)
            rounds.append(timed_pass(standing=False))
        rounds.sort()
        figures[f"{n:,} wake-up"] = rounds[len(rounds) // 2]
    for label, (took, count, admitted) in figures.items():
        print(
            f"{label:>22} pass, {VCS} VCs, {NODES:,} nodes: {took * 1000:7.1f} ms, "
            f"{count} queries, {admitted} admitted"
        )
    took, count, admitted = figures["10,000 wake-up"]
    print(
        f"wake-up pass (standing left to the once-a-second pass), after 5 jobs ended: "
        f"{took * 1000:.1f} ms, {count} queries, {admitted} admitted"
    )
    took, count, admitted = figures["10,000 after 5 ends"]
    print(
        f"admission pass, 10,000 waiting jobs in {VCS} VCs on {NODES:,} nodes, after 5 jobs "
        f"ended (median of {ROUNDS} rounds): {took * 1000:.1f} ms, {count} queries, "
        f"{admitted} admitted"
    )


if __name__ == "__main__":
    main()
