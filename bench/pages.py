"""Server time of the job list and the job page with 100,000 jobs and 1,000,000 tasks.

Pages: the list (own jobs, all jobs, a far page, by state, by keyword), the job page, and the
job page's live part (``/live/``, what every WebSocket news of the job makes the page fetch).
Makes a fresh PostgreSQL database ``bench_pages`` (``BENCH_DB``; at ``BENCH_PG``, default the
local one); ``BENCH_JOBS`` and ``BENCH_ROUNDS`` make a quick, small run for a check,
fills it (jobs with ``bulk_create`` in batches, attempts and tasks with ``INSERT ... SELECT
generate_series``), then times pages through Django's test Client in this process: median and
p99 over ``BENCH_ROUNDS`` requests (default 200) and the queries each page makes, which must not
grow with the page size. Prints the figures, the headline last.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
JOBS = int(os.environ.get("BENCH_JOBS", "100000"))
TASKS_PER_JOB = 10
USERS = 50
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "200"))
BATCH = 5000
DB = os.environ.get("BENCH_DB", "bench_pages")

sys.path.insert(0, str(ROOT))
os.environ["DATABASE_URL"] = f"{PG}/{DB}"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")


def fresh_database() -> None:
    for sql in (f"DROP DATABASE IF EXISTS {DB}", f"CREATE DATABASE {DB}"):
        subprocess.run(["psql", f"{PG}/postgres", "-qc", sql], check=True)


def fill() -> None:
    from django.contrib.auth.models import User
    from django.db import connection
    from django.utils import timezone

    from clusters.models import VirtualCluster
    from jobs.models import Job

    vc, _ = VirtualCluster.objects.get_or_create(name="default")
    users = User.objects.bulk_create(
        [User(username=f"user{i:02d}", password="!") for i in range(USERS)]
    )
    protocol = {
        "protocolVersion": 2,
        "name": "x",
        "type": "job",
        "taskRoles": {
            "worker": {
                "instances": TASKS_PER_JOB,
                "resourcePerInstance": {"cpu": 1, "memoryMB": 512, "gpu": 1},
                "commands": ["python train.py"],
            }
        },
    }
    states = ["SUCCEEDED", "FAILED", "STOPPED", "RUNNING", "WAITING"]
    now = timezone.now()
    for start in range(0, JOBS, BATCH):
        Job.objects.bulk_create(
            [
                Job(
                    owner=users[i % USERS],
                    name=f"job{i:06d}",
                    virtual_cluster=vc,
                    submitted_text="",
                    protocol={**protocol, "name": f"job{i:06d}"},
                    state=states[i % len(states)],
                    reason="done",
                    task_count=TASKS_PER_JOB,
                    gpu_count=TASKS_PER_JOB,
                    created_at=now - timezone.timedelta(seconds=JOBS - i),
                    started_at=now - timezone.timedelta(seconds=JOBS - i),
                )
                for i in range(start, min(JOBS, start + BATCH))
            ]
        )
    with connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO jobs_jobattempt (job_id, number, key, state, reason, created_at)
               SELECT id, 0, 'a' || id, state, '', created_at FROM jobs_job"""
        )
        cursor.execute(
            """INSERT INTO jobs_task (attempt_id, role, index, state, address, ip, ports,
                 diagnostics, retries, accountable_retries, backend_ref, node, stop_requested,
                 created_at, started_at, exit_spec)
               SELECT a.id, 'worker', i, a.state, '10.0.0.' || i, '10.0.0.' || i,
                 jsonb_build_object('http', jsonb_build_array(20000 + i)), '', 0, 0, '',
                 'node' || (a.id %% 16), false, a.created_at, a.created_at, '{}'::jsonb
               FROM jobs_jobattempt a, generate_series(0, %s) AS i""",
            [TASKS_PER_JOB - 1],
        )
        cursor.execute("ANALYZE")


def timed(client: object, path: str) -> tuple[list[float], int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        response = client.get(path)  # type: ignore[attr-defined]
    count = len(queries)  # now: the log the context reads from is reset on reconnection
    assert response.status_code == 200, (path, response.status_code)
    times = []
    for _ in range(ROUNDS):
        began = time.perf_counter()
        client.get(path)  # type: ignore[attr-defined]
        times.append((time.perf_counter() - began) * 1000)
    return times, count


def report(name: str, times: list[float], queries: int) -> float:
    median = statistics.median(times)
    p99 = statistics.quantiles(times, n=100)[98]
    print(f"{name:<42} median {median:6.1f} ms  p99 {p99:6.1f} ms  queries {queries}")
    return median


def main() -> None:
    import django

    fresh_database()
    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import Client

    call_command("migrate", verbosity=0)
    began = time.perf_counter()
    fill()
    print(
        f"filled {JOBS} jobs, {JOBS * TASKS_PER_JOB} tasks in {time.perf_counter() - began:.0f} s"
    )
    user = User.objects.get(username="user07")
    newest_of_user07 = (JOBS - 1) - (JOBS - 1 - 7) % USERS  # jobs go to users in turn
    admin = User.objects.create_user("boss", is_staff=True)
    job_page = f"/jobs/user07~job{newest_of_user07:06d}/"
    few = f"job{JOBS // 2:06d}"[:-1]  # ten jobs' names hold it
    medians = []
    for who, label in ((user, "user07"), (admin, "admin")):
        client = Client()
        client.force_login(who)
        pages = {
            f"list, {label}, own jobs, 25 a page": "/jobs/",
            f"list, {label}, all jobs, 100 a page": "/jobs/?user=&size=100",
            f"list, {label}, all jobs, page 40": "/jobs/?user=&page=40",
            f"list, {label}, RUNNING, by name": "/jobs/?user=&state=RUNNING&sort=name",
            f"list, {label}, keyword, a few jobs": f"/jobs/?user=&q={few}",
            f"list, {label}, keyword, many jobs": "/jobs/?user=&q=job0",
            f"job page, {label}, 10 tasks": f"{job_page}",
            f"job page live part, {label}, 10 tasks": f"{job_page}live/",
        }
        for name, path in pages.items():
            medians.append(report(name, *timed(client, path)))
    client = Client()
    client.force_login(user)
    counts = [timed(client, f"/jobs/?user=&size={size}")[1] for size in (25, 50, 100)]
    print(f"queries per list page at 25/50/100 a page: {counts[0]}/{counts[1]}/{counts[2]}")
    print(f"job list, job page and live part, worst median: {max(medians):.1f} ms")


if __name__ == "__main__":
    main()
