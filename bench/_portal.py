"""What the end-to-end benches share (bench/e2e.py, bench/slurm_e2e.py): the portal of ``make
run`` started on a fresh PostgreSQL database and Redis, its REST API, clients submitting in
parallel, waiting for a batch of jobs, and the figures' spread."""

from __future__ import annotations

import contextlib
import functools
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backends.local import LocalBackend, disk  # noqa: E402 - what the tasks leave, removed

PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
DATABASE = os.environ.get("BENCH_DB", "bench_e2e")  # another name for runs side by side
CLIENTS = 8
PASSWORD = "bench-password"
FINISHED = ("SUCCEEDED", "FAILED", "STOPPED")
JOB = """protocolVersion: 2
name: {name}
type: job
prerequisites: [{{name: img, type: dockerimage, uri: python}}]
taskRoles:
  main:
    instances: 1
    dockerImage: img
    resourcePerInstance: {{cpu: 1, memoryMB: {memory_mb}, gpu: 0}}
    commands: ["true"]
"""


def job_text(name: str, memory_mb: int = 64) -> str:
    """A trivial job (``true``, one task, one CPU) in v2 YAML."""
    return JOB.format(name=name, memory_mb=memory_mb)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def psql(sql: str) -> None:
    quiet = {**os.environ, "PGOPTIONS": "-c client_min_messages=warning"}  # no NOTICEs
    subprocess.run(["psql", f"{PG}/postgres", "-qc", sql], check=True, env=quiet)


def kill_leftovers(marker: str, var_dir: Path) -> None:
    """SIGKILL every process group that carries this run's marker in its environment or runs in
    its scratch directory (tasks run detached, in sessions of their own)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            ours = marker.encode() in (entry / "environ").read_bytes()
            ours = ours or Path(os.readlink(entry / "cwd")).is_relative_to(var_dir)
            group = os.getpgid(int(entry.name))
            if ours and group != os.getpgid(0):
                os.killpg(group, signal.SIGKILL)


class Api:
    """One keep-alive connection to the portal's REST API."""

    def __init__(self, port: int, token: str = "") -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    def call(self, method: str, path: str, body: str = "", kind: str = "") -> tuple[int, Any]:
        headers = {**self.headers, **({"Content-Type": kind} if kind else {})}
        try:
            self.conn.request(method, path, body or None, headers)
            response = self.conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError):
            if method != "GET":
                raise
            self.conn.close()  # closed by the server while idle: once more on a new one,
            self.conn.request(method, path, None, headers)  # as urllib3 and browsers do
            response = self.conn.getresponse()
        raw = response.read()
        try:
            return response.status, json.loads(raw or b"null")
        except ValueError as exc:
            raise RuntimeError(
                f"{method} {path}: {response.status}, not JSON: {raw[:300]!r}"
            ) from exc

    def submit(self, name: str, memory_mb: int = 64) -> None:
        text = job_text(name, memory_mb)
        status, body = self.call("POST", "/api/v2/jobs", text, "text/yaml")
        if status != 202:
            raise RuntimeError(f"submitting {name}: {status} {body}")


def start_portal(
    stack: contextlib.ExitStack,
    marker: str,
    local_cpus: int = 0,
    settings: dict[str, str] | None = None,
    database: str = DATABASE,
) -> int:
    """The portal of ``make run`` on a fresh database and Redis; the port it listens on. With
    ``local_cpus``, admission counts that many CPUs on the local node (``LOCAL_CPUS``);
    ``settings`` are more environment variables (another ``CLUSTER_BACKEND`` and its own)."""
    stack.callback(signal.signal, signal.SIGINT, signal.getsignal(signal.SIGINT))  # at the end
    var_dir = Path(tempfile.mkdtemp(prefix="bench-e2e-"))
    stack.callback(shutil.rmtree, var_dir, ignore_errors=True)
    stack.callback(disk.release_all, var_dir)  # the tasks' file systems, before their files go
    # What the portal's last passes did not clean of its tasks outside its directory: their
    # cgroups and mount gates (``/run/portal-tasks``), left on the host run after run.
    stack.callback(LocalBackend(var_dir / "tasks").cleanup, [])
    stack.callback(kill_leftovers, marker, var_dir)  # runs after the stops below
    redis_port, port = free_port(), free_port()
    redis_server = subprocess.Popen(
        ["redis-server", "--bind", "127.0.0.1", "--port", str(redis_port), "--save", ""]
        + ["--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    stack.callback(redis_server.kill)
    psql(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    psql(f"CREATE DATABASE {database}")
    stack.callback(psql, f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    env = {
        **os.environ,
        "BENCH_E2E_RUN": marker,
        "DATABASE_URL": f"{PG}/{database}",
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "PORTAL_VAR_DIR": str(var_dir),
        "PORTAL_ADMIN_PASSWORD": PASSWORD,
        "CLUSTER_BACKEND": "local",
        "API_RATE_USER": "1000000/minute",  # measure the portal, not its rate limit
        "LOCAL_CPUS": str(local_cpus),
        **(settings or {}),
    }
    log = (var_dir / "runportal.log").open("wb")
    command = [sys.executable, "manage.py", "runportal", "--port", str(port)]
    portal = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=log, stderr=log, start_new_session=True
    )
    stack.callback(stop, portal)
    stack.push(functools.partial(show_log_on_failure, var_dir))  # before its directory goes
    # Unwinding (the callbacks run last first) starts here: a second Ctrl-C must not cut it.
    stack.callback(signal.signal, signal.SIGINT, signal.SIG_IGN)
    deadline = time.monotonic() + 120
    while True:  # up once the web server answers (runportal migrates and makes the admin first)
        with contextlib.suppress(OSError):
            Api(port).call("GET", "/api/v2/info")
            return port
        if portal.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the portal did not start:\n{log_tail(var_dir)}")
        time.sleep(0.2)


def log_tail(var_dir: Path, lines: int = 30) -> str:
    return "\n".join((var_dir / "runportal.log").read_text().splitlines()[-lines:])


def show_log_on_failure(var_dir: Path, kind: type[BaseException] | None, *_: object) -> bool:
    """When the run fails with the portal up, its log's tail, which the run deletes."""
    if kind is not None and not issubclass(kind, KeyboardInterrupt):
        print(f"the portal's log, last lines:\n{log_tail(var_dir, 60)}", file=sys.stderr)
    return False  # the failure goes on


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM (runportal stops its web server, worker and beat), SIGKILL after 30 s."""
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def login(port: int) -> str:
    status, body = Api(port).call(
        "POST",
        "/api/v2/authn/basic/login",
        json.dumps({"username": "admin", "password": PASSWORD}),
        "application/json",
    )
    if status != 200:
        raise RuntimeError(f"login: {status} {body}")
    return str(body["token"])


def in_parallel(work: Callable[[int], None], count: int) -> None:
    """``work(0..count-1)`` on daemon threads (a Ctrl-C does not wait for them); re-raises the
    first failure."""
    failures: list[BaseException] = []

    def run(number: int) -> None:
        try:
            work(number)
        except BaseException as failure:  # noqa: BLE001 - handed to the main thread
            failures.append(failure)

    threads = [threading.Thread(target=run, args=(n,), daemon=True) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(0.2)
    if failures:
        raise failures[0]


def burst(submit: Callable[[int, int], None], jobs: int) -> tuple[float, float]:
    """``jobs`` submissions by ``CLIENTS`` threads: (epoch of the first, seconds they took)."""

    def client(number: int) -> None:
        for sequence in range(number, jobs, CLIENTS):
            submit(number, sequence)

    start = time.time()
    in_parallel(client, CLIENTS)
    return start, time.time() - start


def ours_batch(port: int, token: str, jobs: int, memory_mb: int = 64) -> tuple[float, float, int]:
    """``jobs`` trivial jobs (``batch_<n>``) by ``CLIENTS`` clients: (first submit to last
    finished, submissions per second, most jobs running at once)."""
    apis = [Api(port, token) for _ in range(CLIENTS)]
    start, submitting = burst(lambda c, i: apis[c].submit(f"batch_{i}", memory_mb), jobs)
    api, query = apis[0], "/api/v2/jobs?keyword=batch_&withTotalCount=true&limit=1&state="
    deadline = time.monotonic() + 120 + 5 * jobs
    while api.call("GET", query + ",".join(FINISHED))[1]["totalCount"] < jobs:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{jobs} jobs did not all finish in {5 * jobs + 120} s")
        time.sleep(0.2)
    rows: list[dict[str, Any]] = []
    while len(rows) < jobs:
        rows += api.call("GET", f"/api/v2/jobs?keyword=batch_&limit=1000&offset={len(rows)}")[1]
    failed = [r["name"] for r in rows if r["state"] != "SUCCEEDED"]
    if failed:
        raise RuntimeError(f"{len(failed)} jobs did not succeed, e.g. {failed[0]}")
    last = max(r["completedTime"] for r in rows) / 1000
    return last - start, jobs / submitting, most_at_once(rows)


def most_at_once(rows: list[dict[str, Any]]) -> int:
    """Most jobs between ``launchedTime`` and ``completedTime`` at one moment."""
    edges = sorted(
        [(r["launchedTime"], 1) for r in rows] + [(r["completedTime"], -1) for r in rows]
    )
    running = most = 0
    for _, change in edges:  # an end sorts before a start at the same millisecond
        running += change
        most = max(most, running)
    return most


def slurm_has(name: str, env: dict[str, str] | None = None) -> bool:
    """Whether jobs named ``name`` are still queued or running (or squeue did not answer);
    ``env``: the clients' environment (``SLURM_CONF``)."""
    argv = ["squeue", "-h", "-n", name, "-o", "%i"]
    squeue = subprocess.run(argv, capture_output=True, env=env)
    return squeue.returncode != 0 or bool(squeue.stdout.strip())


def run_quietly(command: list[str], *_client_and_sequence: int) -> None:
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def spread(runs: list[float]) -> str:
    """The median and quartiles of ``runs``."""
    q1, _, q3 = statistics.quantiles(runs, n=4)
    return f"median {statistics.median(runs):.3f} s (quartiles {q1:.3f}-{q3:.3f}, {len(runs)} runs)"
