"""End to end on Slurm: the portal's Slurm backend beside plain sbatch, on the same cluster.

Starts the Docker Slurm cluster of the tests (``tests/support/slurm_cluster.py``: a controller
and two nodes of 2 CPUs and 1000 MB, this machine the submit host; ``--slot``, default 6, as
``TEST_SLOT``, so that test runs on slots 7-9 go on beside it), then the whole portal as ``make
run`` does (bench/_portal.py) with ``CLUSTER_BACKEND=slurm``, the cluster's slurm.conf,
``SLURM_ROOT=<shared>/portal`` and ``SLURM_PARTITION=batch``, and measures trivial jobs
(``true``, one task, 1 CPU, 128 MB):

- one job, submit -> finished: through the REST API until the job is SUCCEEDED, and with
  ``sbatch --parsable`` of a script in the shared directory until ``squeue -t all`` says
  COMPLETED; both polled every 10 ms (``sbatch --wait`` sleeps 2 s, then 8 s, between its own
  looks: it would measure its polling); median of 15 (``BENCH_RUNS``) after one warm-up
  each. The portal's runs are then broken down by the files its Slurm backend writes in
  ``SLURM_ROOT`` (their modification times: job.sh before sbatch, slurm-job after it, the
  batch's output file made as it starts, unless written to later, the task's address.json,
  the portal's peers.env, the task's exit) and the API's launch and completion times;
- ``--jobs N`` (default 200) jobs by 8 clients, first submit -> last finished: the portal's
  (last ``completedTime``) and sbatch's (until ``squeue`` asked every 0.5 s shows none).

Our figures print as measured; the ratios portal / sbatch come last. Without Docker or Slurm's
client commands (``make docker slurm-client``) it says so and exits 0. The cluster, the portal
and everything they started are removed on the way out, Ctrl-C included.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]
from bench._portal import (  # noqa: E402
    CLIENTS,
    FINISHED,
    Api,
    burst,
    login,
    ours_batch,
    slurm_has,
    spread,
    start_portal,
)
from tests.support import slurm_cluster  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "15"))  # single jobs measured on each side
MEMORY_MB = 128
POLL = 0.01  # seconds between looks at one job, both sides
SLURM_DONE = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL"}
# The portal's files of a task, in the order they are written: (file, what it marks).
MARKS = (
    ("job.sh", "batch script written (sbatch next)"),
    ("slurm-job", "sbatch returned"),
    ("slurm-*.out", "batch script started on the node (its output file made)"),
    ("main-0/address.json", "task started on its node, address published"),
    ("main-0/peers.env", "portal published peers.env"),
    ("main-0/exit", "task's wrapper wrote its exit code"),
)


def portal_single(api: Api) -> tuple[list[float], list[dict[str, float]]]:
    """Submit -> SUCCEEDED of one job at a time: the latencies and, per run, the epochs of
    submit, submit answered, launched and completed (API) and SUCCEEDED seen."""
    latencies, events = [], []
    for run in range(RUNS + 1):
        name = f"single_{run}"
        began, start = time.time(), time.perf_counter()
        api.submit(name, MEMORY_MB)
        posted = time.time()
        while True:
            job = api.call("GET", f"/api/v2/jobs/admin~{name}")[1]
            if job["jobStatus"]["state"] in FINISHED:
                break
            time.sleep(POLL)
        latencies.append(time.perf_counter() - start)
        status = job["jobStatus"]
        if status["state"] != "SUCCEEDED":
            raise RuntimeError(f"job {name} ended {status['state']}: {status}")
        events.append(
            {
                "submit": began,
                "answered": posted,
                "launched": (status.get("launchedTime") or 0) / 1000,
                "completed": (status.get("completedTime") or 0) / 1000,
                "seen": time.time(),
            }
        )
    return latencies[1:], events[1:]  # the first one warms up


def breakdown(root: Path, events: list[dict[str, float]]) -> list[tuple[str, float]]:
    """Median seconds from submit to each mark, pairing the runs with the attempts' directories
    in the order they were made (one job at a time, before the batch)."""
    attempts = sorted(
        (d for d in root.iterdir() if (d / "job.sh").exists()),
        key=lambda d: (d / "job.sh").stat().st_mtime,
    )[1 : RUNS + 1]  # the warm-up's first
    if len(attempts) != len(events):
        return []
    marks: dict[str, list[float]] = {}
    for attempt, event in zip(attempts, events, strict=True):
        stamps = [("submit answered", event["answered"])]
        for path, label in MARKS:
            with contextlib.suppress(OSError, StopIteration):
                stamps.append((label, next(attempt.glob(path)).stat().st_mtime))
        stamps += [("launchedTime (API)", event["launched"])]
        stamps += [("completedTime (API)", event["completed"]), ("SUCCEEDED seen", event["seen"])]
        for label, stamp in stamps:
            if stamp:
                marks.setdefault(label, []).append(stamp - event["submit"])
    return sorted(((k, statistics.median(v)) for k, v in marks.items()), key=lambda m: m[1])


def run_portal(cluster: slurm_cluster.SlurmCluster, jobs: int, marker: str) -> dict[str, Any]:
    root = cluster.shared / "portal"
    settings = {
        "CLUSTER_BACKEND": "slurm",
        "SLURM_CONF": str(cluster.conf),
        "SLURM_ROOT": str(root),
        "SLURM_PARTITION": cluster.partition,
    }
    with contextlib.ExitStack() as stack:
        port = start_portal(stack, marker, settings=settings, database="bench_slurm_e2e")
        token = login(port)
        single, events = portal_single(Api(port, token))
        steps = breakdown(root, events)
        total, per_second, most = ours_batch(port, token, jobs, MEMORY_MB)
    return {
        "single": single,
        "steps": steps,
        "batch": total,
        "per_second": per_second,
        "most": most,
    }


def run_sbatch(cluster: slurm_cluster.SlurmCluster, jobs: int, marker: str) -> dict[str, Any]:
    env = {**os.environ, **cluster.env}
    script = cluster.shared / "bench" / "true.sh"
    script.parent.mkdir(mode=0o755, exist_ok=True)
    script.write_text("#!/bin/sh\ntrue\n")
    name = f"bench_{marker[:8]}"
    sbatch = ["sbatch", "--parsable", "-p", cluster.partition, "-n1", "-c1", "-o", "/dev/null"]
    sbatch += [f"--mem-per-cpu={MEMORY_MB}M"]

    def submit(job_name: str) -> str:
        done = subprocess.run(
            [*sbatch, "-J", job_name, str(script)],
            capture_output=True,
            text=True,
            check=True,
            env=env,
            cwd=cluster.shared,
        )
        return done.stdout.strip().split(";")[0]

    try:
        latencies = []
        for _ in range(RUNS + 1):
            start = time.perf_counter()
            job_id = submit(f"{name}_single")
            while (state := slurm_state(job_id, env)) not in SLURM_DONE:
                time.sleep(POLL)
            latencies.append(time.perf_counter() - start)
            if state != "COMPLETED":
                raise RuntimeError(f"Slurm job {job_id} ended {state}")
        began, submitting = burst(lambda _c, _i: None if submit(f"{name}_batch") else None, jobs)
        deadline = time.monotonic() + 120 + 5 * jobs
        while slurm_has(f"{name}_batch", env):
            if time.monotonic() > deadline:
                raise RuntimeError(f"Slurm did not run {jobs} jobs in {5 * jobs + 120} s")
            time.sleep(0.5)
        return {
            "single": latencies[1:],
            "batch": time.time() - began,
            "per_second": jobs / submitting,
        }
    finally:
        cancel = ["scancel", "-n", f"{name}_single,{name}_batch"]
        subprocess.run(cancel, check=False, env=env, capture_output=True)


def slurm_state(job_id: str, env: dict[str, str]) -> str:
    """The job's state as squeue shows it, finished jobs included ('' while it does not)."""
    squeue = ["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T"]
    done = subprocess.run(squeue, capture_output=True, text=True, env=env)
    return done.stdout.strip()


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def report_portal(jobs: int, ours: dict[str, Any]) -> None:
    print("\n== portal: runportal, CLUSTER_BACKEND=slurm, Docker Slurm 2 nodes x 2 CPUs")
    print(f"one trivial job, submit -> SUCCEEDED: {spread(ours['single'])}")
    if ours["steps"]:
        print("  where the time goes (median seconds after the submit request):")
        for label, seconds in ours["steps"]:
            print(f"  {seconds:7.3f}  {label}")
    print(
        f"{jobs} jobs by {CLIENTS} clients, first submit -> last finished: {ours['batch']:.1f} s"
        f" (at most {ours['most']} running at once); {ours['per_second']:.1f} submissions/s"
    )
    print(load(), flush=True)


def report(jobs: int, ours: dict[str, Any], plain: dict[str, Any]) -> None:
    print("\n== plain sbatch on the same cluster (script in the shared directory)")
    print(f"one trivial job, sbatch -> COMPLETED (squeue): {spread(plain['single'])}")
    print(
        f"{jobs} jobs by {CLIENTS} clients, first submit -> none left in squeue: "
        f"{plain['batch']:.1f} s; {plain['per_second']:.1f} submissions/s"
    )
    print(load())
    ours_single, plain_single = (
        statistics.median(ours["single"]),
        statistics.median(plain["single"]),
    )
    print("\n== portal on Slurm / plain sbatch (above 1 is slower)")
    print(
        f"one trivial job: {ours_single:.3f} s vs {plain_single:.3f} s: "
        f"{ours_single - plain_single:+.3f} s per job, {ours_single / plain_single:.2f}x"
    )
    print(
        f"{jobs} jobs: {ours['batch']:.1f} s vs {plain['batch']:.1f} s: "
        f"{ours['batch'] / plain['batch']:.2f}x"
    )


def interrupted(*_: Any) -> None:
    raise KeyboardInterrupt  # SIGTERM unwinds as Ctrl-C does


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=200, help="jobs in the batch (default 200)")
    parser.add_argument("--slot", type=int, default=6, help="the cluster's TEST_SLOT (6)")
    args = parser.parse_args()
    if missing := slurm_cluster.missing_tools():
        print(f"Slurm on Docker: not measured, this machine lacks {', '.join(missing)}")
        return
    signal.signal(signal.SIGTERM, interrupted)
    marker = uuid.uuid4().hex
    print(load())
    cluster = slurm_cluster.start(args.slot)
    try:
        ours = run_portal(cluster, args.jobs, marker)
        report_portal(args.jobs, ours)
        plain = run_sbatch(cluster, args.jobs, marker)
    finally:
        slurm_cluster.stop_cluster(cluster)
    report(args.jobs, ours, plain)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("interrupted: what the bench started is stopped")
