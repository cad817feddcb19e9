"""``GET /api/v2/jobs`` latency with 100,000 jobs: 8 concurrent clients, PostgreSQL, uvicorn.

Makes a fresh database ``bench_list`` (``BENCH_DB``) on the PostgreSQL at ``BENCH_PG`` (default
the local one), bulk-creates ``BENCH_JOBS`` (default 100,000) jobs of 100 users, starts the
portal and serves it as ``make run`` does (uvicorn, a worker process per core) and has
8 clients, each signed in as a user of its own, list jobs for ``BENCH_SECONDS`` (default 10):
the first page newest first, and a page filtered by user and state. Prints the web processes'
CPU per request (user + system time of every process the server started, sign-ins excluded),
p99 and median, headline last.

A client per user: DRF's rate limit keeps each user's recent request times and reads and writes
them on every call, so one user making every request measured the length of that list rather
than what 8 people listing jobs wait.
"""

from __future__ import annotations

import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from portal.management.commands.runportal import free_port, web_command, web_processes  # noqa: E402

PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
DB = os.environ.get("BENCH_DB", "bench_list")  # another name for runs side by side
DB_URL = f"{PG}/{DB}"
CLIENTS = 8
SECONDS = float(os.environ.get("BENCH_SECONDS", "10"))
JOBS = int(os.environ.get("BENCH_JOBS", "100000"))
PATHS = ["/api/v2/jobs", "/api/v2/jobs?username=u7&state=SUCCEEDED&limit=20"]

SEED = """
import random
from datetime import timedelta
from django.contrib.auth.models import User
from django.utils import timezone
from clusters.models import VirtualCluster
from jobs.models import Job
vc = VirtualCluster.objects.named("default")
users = User.objects.bulk_create([User(username=f"u{i}") for i in range(100)])
for user in users[:CLIENTS]:
    user.set_password("bench-password")
    user.save(update_fields=["password"])
protocol = {"protocolVersion": 2, "name": "j", "type": "job", "taskRoles": {"w": {}}}
states = ["SUCCEEDED", "FAILED", "STOPPED", "RUNNING", "WAITING"]
now = timezone.now()
rng = random.Random(7)
batch = []
for n in range(JOBS):
    batch.append(Job(owner=users[n % 100], name=f"job_{n}", virtual_cluster=vc,
        submitted_text="", protocol=protocol, state=rng.choice(states), task_count=2,
        created_at=now - timedelta(seconds=JOBS - n)))
    if len(batch) == 5000:
        Job.objects.bulk_create(batch)
        batch = []
Job.objects.bulk_create(batch)
"""


def sh(*args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run(args, check=True, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)


def login(port: int, username: str) -> str:
    deadline = time.monotonic() + 30
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            body = json.dumps({"username": username, "password": "bench-password"})
            conn.request(
                "POST", "/api/v2/authn/basic/login", body, {"Content-Type": "application/json"}
            )
            return str(json.loads(conn.getresponse().read())["token"])
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def seed(env: dict[str, str]) -> None:
    code = f"JOBS = {JOBS}\nCLIENTS = {CLIENTS}\n{SEED}"
    sh(sys.executable, "manage.py", "shell", "-c", code, env=env)


def cpu_seconds(roots: list[int]) -> float:
    """User + system CPU time of ``roots`` and every process below them (a server's workers)."""
    ticks = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, float]] = {}  # pid: (parent, seconds)
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, ValueError, IndexError):
            continue
        stats[int(proc.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / ticks)
    tree, total = set(roots), 0.0
    while grown := {pid for pid, (parent, _) in stats.items() if parent in tree} - tree:
        tree |= grown
    for pid in tree:
        total += stats.get(pid, (0, 0.0))[1]
    return total


def run_clients(port: int, servers: list[int]) -> tuple[list[float], float]:
    """Each request's time, and the servers' CPU seconds while the clients ran."""
    timings: list[list[float]] = [[] for _ in range(CLIENTS)]
    errors: list[int] = [0] * CLIENTS
    tokens = [login(port, f"u{n}") for n in range(CLIENTS)]
    cpu_before = cpu_seconds(servers)
    stop_at = time.monotonic() + SECONDS

    def client(number: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        headers = {"Authorization": f"Bearer {tokens[number]}"}
        sequence = 0
        while time.monotonic() < stop_at:
            sequence += 1
            started = time.perf_counter()
            conn.request("GET", PATHS[sequence % len(PATHS)], headers=headers)
            response = conn.getresponse()
            response.read()
            if response.status == 200:
                timings[number].append(time.perf_counter() - started)
            else:
                errors[number] += 1

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    cpu = cpu_seconds(servers) - cpu_before
    if sum(errors):
        print(f"errors: {sum(errors)}")
    return [t for per_client in timings for t in per_client], cpu


def main() -> None:
    env = {
        **os.environ,
        "DATABASE_URL": DB_URL,
        "LOG_LEVEL": "WARNING",
        "REDIS_URL": os.environ.get("BENCH_REDIS", "redis://127.0.0.1:6379/15"),
        "API_RATE_USER": "1000000/minute",  # measure the server, not the rate limit
    }
    sh("psql", f"{PG}/postgres", "-qc", f"DROP DATABASE IF EXISTS {DB}")
    sh("psql", f"{PG}/postgres", "-qc", f"CREATE DATABASE {DB}")
    sh(sys.executable, "manage.py", "migrate", "-v0", env=env)
    seed(env)
    sh("psql", DB_URL, "-qc", "ANALYZE")
    # Served as ``make run`` serves it: uvicorn with WEB_PROCESSES workers (one per core unless
    # told), its access log dropped.
    port, processes = free_port(), web_processes()
    server = subprocess.Popen(
        web_command("127.0.0.1", port, processes),
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        timings, cpu = run_clients(port, [server.pid])
    finally:
        server.terminate()
        server.wait(30)
    timings.sort()
    p99 = timings[min(len(timings) - 1, int(len(timings) * 0.99))]
    print(f"jobs: {JOBS}, clients: {CLIENTS}, web processes: {processes}, seconds: {SECONDS:.0f}")
    print(f"requests: {len(timings)}")
    print(f"requests per second: {len(timings) / SECONDS:.1f}")
    print(f"server CPU per request: {cpu / len(timings) * 1000:.2f} ms")
    print(f"p99 list latency: {p99 * 1000:.1f} ms")
    print(f"median list latency: {statistics.median(timings) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
