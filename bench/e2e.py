"""End to end, beside Slurm: how long trivial jobs take from submit to finished.

Starts the whole portal as ``make run`` does (``manage.py runportal``: uvicorn, a Celery worker,
beat) on the local backend, with a fresh PostgreSQL database ``bench_e2e`` (at ``BENCH_PG``),
a redis-server of its own on a free port and a scratch ``PORTAL_VAR_DIR``; logs in as the admin
and measures through the REST API (``POST /api/v2/jobs``, v2 YAML):

- one trivial job, submit -> SUCCEEDED, seen by a client that asks for the job every 10 ms and
  by one that asks once and waits (``?wait=50``: answered once the job has finished, as
  ``srun`` is told): median of 10 each, taken in turn (after one warm-up job each), with the
  quartiles as the noise;
- ``--jobs N`` (default 1000) trivial one-CPU jobs submitted by 8 concurrent clients, first
  submit to last finished (the jobs' ``completedTime``): once with the cluster's capacity as the
  local backend reports it (as many at once as there are CPUs), and once on a portal started
  again with ``LOCAL_CPUS`` at 50 jobs per CPU (oversubscribed, as Slurm's ``over``), after
  one job there warmed it up as the single jobs did the first (its worker is ready a second
  after its web server answers);
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
    run_quietly,
    slurm_has,
    spread,
    start_portal,
)

OVERSUBSCRIBED = 50  # jobs per CPU, as bench/slurm-setup.sh's partition over (FORCE:50)
RUNS = 10
SLURM_PIDS = ("/run/munge/munged.pid", "/run/slurmctld.pid", "/run/slurmd.pid")


def one_job(api: Api, name: str, waits: bool = False) -> float:
    """Submit a trivial job, then ask for it every 10 ms until it has ended, or (``waits``) ask
    once with ``?wait=50``: the seconds it took."""
    began = time.perf_counter()
    api.submit(name)
    path = f"/api/v2/jobs/admin~{name}" + ("?wait=50" if waits else "")
    while (state := api.call("GET", path)[1]["jobStatus"]["state"]) not in FINISHED:
        if not waits:
            time.sleep(0.01)
    if state != "SUCCEEDED":
        raise RuntimeError(f"job {name} ended {state}")
    return time.perf_counter() - began


def ours_single(api: Api) -> tuple[list[float], list[float]]:
    """One job at a time, polled and waited for in turn: the seconds each took."""
    polled, waited = [], []
    for run in range(RUNS + 1):
        polled.append(one_job(api, f"single_{run}"))
        waited.append(one_job(api, f"waited_{run}", waits=True))
    return polled[1:], waited[1:]  # the first of each warms up


def run_ours(jobs: int, marker: str) -> dict[str, Any]:
    """One job at a time, then the batch at one job per CPU; then, on a portal started again
    with ``LOCAL_CPUS`` at ``OVERSUBSCRIBED`` jobs per CPU (as Slurm's partition ``over``), the
    batch oversubscribed."""
    with contextlib.ExitStack() as stack:
        port = start_portal(stack, marker)
        token = login(port)
        single, waited = ours_single(Api(port, token))
        total, per_second, most = ours_batch(port, token, jobs)
    with contextlib.ExitStack() as stack:
        port = start_portal(stack, marker, local_cpus=(os.cpu_count() or 1) * OVERSUBSCRIBED)
        token = login(port)
        one_job(Api(port, token), "warm_up")  # its worker up and warm, as the first portal's
        over, _, most_over = ours_batch(port, token, jobs)
    return {
        "single": single,
        "waited": waited,
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


def report_ours(jobs: int, ours: dict[str, Any]) -> None:
    """Our figures, printed as soon as measured (Slurm's take minutes more)."""
    cpus = os.cpu_count()
    print(f"\n== ours: runportal, local backend, PostgreSQL, {cpus} CPUs")
    print(f"one trivial job, submit -> SUCCEEDED, polled every 10 ms: {spread(ours['single'])}")
    print(f"one trivial job, submit -> SUCCEEDED, waited for: {spread(ours['waited'])}")
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
    s1, _, s3 = statistics.quantiles(slurm["single"], n=4)
    print("\n== ours / Slurm (times: above 1 is slower; submissions: below 1 is fewer)")
    for runs, client in (("single", "polled every 10 ms"), ("waited", "waited for")):
        o1, _, o3 = statistics.quantiles(ours[runs], n=4)
        single = statistics.median(ours[runs]) / statistics.median(slurm["single"])
        print(
            f"one trivial job, {client}: {single:.1f}x "
            f"(from the quartiles: {o1 / s3:.1f}x to {o3 / s1:.1f}x)"
        )
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
