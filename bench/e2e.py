"""End to end, beside Slurm: how long trivial jobs take from submit to finished.

Starts the whole portal as ``make run`` does (``manage.py runportal``: uvicorn, a Celery worker,
beat) on the local backend, with a fresh PostgreSQL database ``bench_e2e`` (at ``BENCH_PG``),
a redis-server of its own on a free port and a scratch ``PORTAL_VAR_DIR``; logs in as the admin
and measures through the REST API (``POST /api/v2/jobs``, v2 YAML):

- one trivial job, submit -> SUCCEEDED, polling the job every 10 ms: median of 10 (after one
  warm-up job), with the quartiles as the noise;
- ``--jobs N`` (default 1000) trivial one-CPU jobs submitted by 8 concurrent clients, first
  submit to last finished (the jobs' ``completedTime``): once with the cluster's capacity as the
  local backend reports it (as many at once as there are CPUs), and once on a portal started
  again with ``LOCAL_CPUS`` at 50 jobs per CPU (oversubscribed, as Slurm's ``over``);
- submissions per second while those 8 clients submit.

When Slurm can be set up (``bench/slurm-setup.sh``: Debian's slurm-wlm and munge, one node) the
same work runs on it: ``srun true`` submit -> finished, N ``sbatch --wrap=true`` jobs by 8
clients oversubscribed (partition ``over``, OverSubscribe=FORCE) and, with ``--slurm-per-cpu``,
one job per CPU (partition ``bench``: Slurm's backfill takes about 20 minutes for 1,000), until
``squeue`` (asked every 0.5 s) shows none. Our figures print as soon as measured; the ratios
ours / Slurm come last. Everything started is stopped on the way out, Ctrl-C and failures included:
processes, database, Redis, scratch files, Slurm jobs, and the Slurm daemons when this run
started them.
"""

from __future__ import annotations

import argparse
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
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backends.local import disk  # noqa: E402 - the tasks' file systems, unmounted

PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
DATABASE = os.environ.get("BENCH_DB", "bench_e2e")  # another name for runs side by side
CLIENTS = 8
OVERSUBSCRIBED = 50  # jobs per CPU, as bench/slurm-setup.sh's partition over (FORCE:50)
RUNS = 10
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
    resourcePerInstance: {{cpu: 1, memoryMB: 64, gpu: 0}}
    commands: ["true"]
"""
SLURM_PIDS = ("/run/munge/munged.pid", "/run/slurmctld.pid", "/run/slurmd.pid")


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
        return response.status, json.loads(response.read() or b"null")

    def submit(self, name: str) -> None:
        status, body = self.call("POST", "/api/v2/jobs", JOB.format(name=name), "text/yaml")
        if status != 202:
            raise RuntimeError(f"submitting {name}: {status} {body}")


def start_portal(stack: contextlib.ExitStack, marker: str, local_cpus: int = 0) -> int:
    """The portal of ``make run`` on a fresh database and Redis; the port it listens on. With
    ``local_cpus``, admission counts that many CPUs on the local node (``LOCAL_CPUS``)."""
    stack.callback(signal.signal, signal.SIGINT, signal.getsignal(signal.SIGINT))  # at the end
    var_dir = Path(tempfile.mkdtemp(prefix="bench-e2e-"))
    stack.callback(shutil.rmtree, var_dir, ignore_errors=True)
    stack.callback(disk.release_all, var_dir)  # the tasks' file systems, before their files go
    stack.callback(kill_leftovers, marker, var_dir)  # runs after the stops below
    redis_port, port = free_port(), free_port()
    redis_server = subprocess.Popen(
        ["redis-server", "--bind", "127.0.0.1", "--port", str(redis_port), "--save", ""]
        + ["--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    stack.callback(redis_server.kill)
    psql(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
    psql(f"CREATE DATABASE {DATABASE}")
    stack.callback(psql, f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
    env = {
        **os.environ,
        "BENCH_E2E_RUN": marker,
        "DATABASE_URL": f"{PG}/{DATABASE}",
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "PORTAL_VAR_DIR": str(var_dir),
        "PORTAL_ADMIN_PASSWORD": PASSWORD,
        "CLUSTER_BACKEND": "local",
        "API_RATE_USER": "1000000/minute",  # measure the portal, not its rate limit
        "LOCAL_CPUS": str(local_cpus),
    }
    log = (var_dir / "runportal.log").open("wb")
    command = [sys.executable, "manage.py", "runportal", "--port", str(port)]
    portal = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=log, stderr=log, start_new_session=True
    )
    stack.callback(stop, portal)
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


def log_tail(var_dir: Path) -> str:
    return "\n".join((var_dir / "runportal.log").read_text().splitlines()[-30:])


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


def ours_single(api: Api) -> list[float]:
    latencies = []
    for run in range(RUNS + 1):
        name = f"single_{run}"
        began = time.perf_counter()
        api.submit(name)
        while (
            state := api.call("GET", f"/api/v2/jobs/admin~{name}")[1]["jobStatus"]["state"]
        ) not in FINISHED:
            time.sleep(0.01)
        if state != "SUCCEEDED":
            raise RuntimeError(f"job {name} ended {state}")
        latencies.append(time.perf_counter() - began)
    return latencies[1:]  # the first one warms up


def ours_batch(port: int, token: str, jobs: int) -> tuple[float, float, int]:
    """(first submit to last finished, submissions per second, most jobs running at once)."""
    apis = [Api(port, token) for _ in range(CLIENTS)]
    start, submitting = burst(lambda c, i: apis[c].submit(f"batch_{i}"), jobs)
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


def run_ours(jobs: int, marker: str) -> dict[str, Any]:
    """One job at a time, then the batch at one job per CPU; then, on a portal started again
    with ``LOCAL_CPUS`` at ``OVERSUBSCRIBED`` jobs per CPU (as Slurm's partition ``over``), the
    batch oversubscribed."""
    with contextlib.ExitStack() as stack:
        port = start_portal(stack, marker)
        token = login(port)
        single = ours_single(Api(port, token))
        total, per_second, most = ours_batch(port, token, jobs)
    with contextlib.ExitStack() as stack:
        port = start_portal(stack, marker, local_cpus=(os.cpu_count() or 1) * OVERSUBSCRIBED)
        over, _, most_over = ours_batch(port, login(port), jobs)
    return {
        "single": single,
        "batch": total,
        "per_second": per_second,
        "most": most,
        "over": over,
        "most_over": most_over,
    }


def slurm_setup() -> tuple[bool, str, list[str]]:
    """Whether Slurm is up, its version or why not, and the pid files of the daemons this run
    started (stopped again at the end)."""
    running = [p for p in SLURM_PIDS if pid_alive(Path(p))]
    setup = subprocess.run(
        ["sh", str(ROOT / "bench/slurm-setup.sh")], capture_output=True, text=True
    )
    started = [p for p in SLURM_PIDS if p not in running and pid_alive(Path(p))]
    if setup.returncode != 0:
        return False, f"Slurm could not be set up: {setup.stderr.strip()[-300:]}", started
    version = subprocess.run(["sinfo", "--version"], capture_output=True, text=True).stdout
    return True, f"Slurm ({version.strip()})", started


def pid_alive(pid_file: Path) -> bool:
    with contextlib.suppress(ValueError, OSError):
        os.kill(int(pid_file.read_text().split()[0]), 0)
        return True
    return False


def run_slurm(jobs: int, marker: str, per_cpu: bool) -> dict[str, Any]:
    name = f"bench_e2e_{marker[:8]}"
    submit = ["-Q", "-c1", "-o", "/dev/null"]
    try:
        latencies = []
        for _ in range(RUNS + 1):
            began = time.perf_counter()
            subprocess.run(["srun", *submit, "-J", name, "-p", "bench", "true"], check=True)
            latencies.append(time.perf_counter() - began)
        figures: dict[str, Any] = {"single": latencies[1:]}
        partitions = [("over", ["--oversubscribe"])] + ([("bench", [])] if per_cpu else [])
        for partition, extra in partitions:
            batch = ["-J", f"{name}_{partition}"]  # a name each: a batch waits for its own jobs
            sbatch = ["sbatch", *submit, *batch, "-p", partition, *extra, "--wrap=true"]
            start, submitting = burst(functools.partial(run_quietly, sbatch), jobs)
            deadline = time.monotonic() + 120 + 5 * jobs
            while slurm_has(batch[1]):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"Slurm did not run {jobs} jobs in {5 * jobs + 120} s")
                time.sleep(0.5)  # each squeue costs slurmctld a listing of every job
            figures[partition] = time.time() - start
            figures.setdefault("per_second", jobs / submitting)
        return figures
    finally:
        subprocess.run(["scancel", "-n", f"{name},{name}_bench,{name}_over"], check=False)


def slurm_has(name: str) -> bool:
    """Whether jobs named ``name`` are still queued or running (or squeue did not answer)."""
    squeue = subprocess.run(["squeue", "-h", "-n", name, "-o", "%i"], capture_output=True)
    return squeue.returncode != 0 or bool(squeue.stdout.strip())


def run_quietly(command: list[str], *_client_and_sequence: int) -> None:
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def spread(runs: list[float]) -> str:
    q1, _, q3 = statistics.quantiles(runs, n=4)
    return f"median {statistics.median(runs):.3f} s (quartiles {q1:.3f}-{q3:.3f}, {RUNS} runs)"


def report_ours(jobs: int, ours: dict[str, Any]) -> None:
    """Our figures, printed as soon as measured (Slurm's take minutes more)."""
    cpus = os.cpu_count()
    print(f"\n== ours: runportal, local backend, PostgreSQL, {cpus} CPUs")
    print(f"one trivial job, submit -> SUCCEEDED: {spread(ours['single'])}")
    print(
        f"{jobs} one-CPU jobs by {CLIENTS} clients, first submit -> last finished: "
        f"{ours['batch']:.1f} s one job per CPU (at most {ours['most']} running at once), "
        f"{ours['over']:.1f} s oversubscribed (LOCAL_CPUS={cpus}x{OVERSUBSCRIBED}: at most "
        f"{ours['most_over']} at once); one run each"
    )
    print(f"submissions per second with {CLIENTS} clients: {ours['per_second']:.1f} /s", flush=True)


def report(jobs: int, ours: dict[str, Any] | None, slurm: dict[str, Any] | None, note: str) -> None:
    """Slurm's figures and the ratios, last."""
    cpus = os.cpu_count()
    if slurm is None:
        print(f"\n== Slurm: not compared. {note}")
        return
    print(f"\n== {note}: one node, {cpus} CPUs")
    print(f"one trivial job, srun true: {spread(slurm['single'])}")
    per_cpu = f"{slurm['bench']:.1f} s one job per CPU, " if "bench" in slurm else ""
    print(
        f"{jobs} one-CPU jobs (sbatch) by {CLIENTS} clients, first submit -> last finished: "
        f"{per_cpu}{slurm['over']:.1f} s oversubscribed"
    )
    print(f"submissions per second with {CLIENTS} clients (sbatch): {slurm['per_second']:.1f} /s")
    if ours is None:
        return
    o1, _, o3 = statistics.quantiles(ours["single"], n=4)
    s1, _, s3 = statistics.quantiles(slurm["single"], n=4)
    single = statistics.median(ours["single"]) / statistics.median(slurm["single"])
    print("\n== ours / Slurm (times: above 1 is slower; submissions: below 1 is fewer)")
    print(f"one trivial job: {single:.1f}x (from the quartiles: {o1 / s3:.1f}x to {o3 / s1:.1f}x)")
    if "bench" in slurm:
        print(f"{jobs} jobs, one job per CPU: {ours['batch'] / slurm['bench']:.2f}x")
    print(f"{jobs} jobs, both oversubscribed: {ours['over'] / slurm['over']:.2f}x")
    print(f"submissions per second: {ours['per_second'] / slurm['per_second']:.2f}x")


def interrupted(*_: Any) -> None:
    raise KeyboardInterrupt  # SIGTERM unwinds as Ctrl-C does: everything started is stopped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=1000, help="jobs in the batch (default 1000)")
    parser.add_argument("--no-slurm", action="store_true", help="measure the portal alone")
    parser.add_argument("--slurm-only", action="store_true", help="measure Slurm alone")
    parser.add_argument(
        "--slurm-per-cpu",
        action="store_true",
        help="also Slurm at one job per CPU (its backfill takes about 20 minutes for 1,000)",
    )
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, interrupted)
    marker = uuid.uuid4().hex
    ours = None if args.slurm_only else run_ours(args.jobs, marker)
    if ours is not None:
        report_ours(args.jobs, ours)
    slurm, note, started = None, "(--no-slurm)", list[str]()
    try:
        if not args.no_slurm:
            up, note, started = slurm_setup()
            slurm = run_slurm(args.jobs, marker, args.slurm_per_cpu) if up else None
    finally:
        for pid_file in reversed(started):  # the daemons this run started, and only those
            with contextlib.suppress(ValueError, OSError):
                os.kill(int(Path(pid_file).read_text().split()[0]), signal.SIGTERM)
    report(args.jobs, ours, slurm, note)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("interrupted: what the bench started is stopped")
