"""Jobs accepted per second through ``POST /api/v2/jobs``: 8 concurrent clients, PostgreSQL.

Starts the portal (uvicorn, as ``make run`` does) on a fresh database ``bench_portal`` (or
``BENCH_DB``) of the PostgreSQL at ``BENCH_PG`` (default the local one), logs in, and has 8
threads submit distinct jobs for ``BENCH_SECONDS`` (default 10). Prints the figure last.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
DB = os.environ.get("BENCH_DB", "bench_portal")  # another name for runs side by side
DB_URL = f"{PG}/{DB}"
CLIENTS = 8
SECONDS = float(os.environ.get("BENCH_SECONDS", "10"))
JOB = """protocolVersion: 2
name: {name}
type: job
prerequisites: [{{name: img, type: dockerimage, uri: python}}]
taskRoles:
  worker:
    instances: 2
    dockerImage: img
    resourcePerInstance: {{cpu: 1, memoryMB: 256, gpu: 0, ports: {{http: 1}}}}
    commands: ["echo hello"]
"""


def sh(*args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run(args, check=True, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)


def main() -> None:
    redis_url = os.environ.get("BENCH_REDIS", "redis://127.0.0.1:6379/15")
    env = {
        **os.environ,
        "DATABASE_URL": DB_URL,
        "PORTAL_ADMIN_PASSWORD": "bench-password",
        "LOG_LEVEL": "WARNING",
        "REDIS_URL": redis_url,
        "API_RATE_USER": "1000000/minute",  # measure the server, not the rate limit
    }
    sh("psql", f"{PG}/postgres", "-qc", f"DROP DATABASE IF EXISTS {DB}")
    sh("psql", f"{PG}/postgres", "-qc", f"CREATE DATABASE {DB}")
    sh(sys.executable, "manage.py", "migrate", "-v0", env=env)
    sh(sys.executable, "manage.py", "ensure_admin", env=env)
    sys.path.insert(0, str(ROOT))
    from portal.management.commands.runportal import free_port, web_command, web_processes

    port = free_port()
    server = subprocess.Popen(
        web_command("127.0.0.1", port, web_processes()),
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        token = login(port)
        counts = run_clients(port, token)
    finally:
        server.terminate()
        server.wait(30)
        sh("redis-cli", "-u", redis_url, "flushdb")  # the reconcile requests nobody consumed
    accepted = sum(c[0] for c in counts)
    errors = sum(c[1] for c in counts)
    print(f"clients: {CLIENTS}, seconds: {SECONDS:.0f}, accepted: {accepted}, errors: {errors}")
    print(f"submissions per second: {accepted / SECONDS:.1f}")


def login(port: int) -> str:
    deadline = time.monotonic() + 30
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request(
                "POST",
                "/api/v2/authn/basic/login",
                json.dumps({"username": "admin", "password": "bench-password"}),
                {"Content-Type": "application/json"},
            )
            return str(json.loads(conn.getresponse().read())["token"])
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def run_clients(port: int, token: str) -> list[tuple[int, int]]:
    results: list[tuple[int, int]] = [(0, 0)] * CLIENTS
    stop_at = time.monotonic() + SECONDS

    def client(number: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "text/yaml"}
        ok = bad = 0
        sequence = 0
        while time.monotonic() < stop_at:
            sequence += 1
            conn.request("POST", "/api/v2/jobs", JOB.format(name=f"c{number}_{sequence}"), headers)
            response = conn.getresponse()
            response.read()
            if response.status == 202:
                ok += 1
            else:
                bad += 1
        results[number] = (ok, bad)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


if __name__ == "__main__":
    main()
