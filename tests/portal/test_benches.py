"""The benchmarks of ``make bench`` still run, at sizes small enough for the suite: one rotted
unseen for a session (``bench/k8s_watch.py`` woke passes that observed nothing and never
ended). Each makes a database of its own on the tests' PostgreSQL server; the figures
themselves are ``make bench``'s, not the suite's. Slurm's side of ``bench/e2e.py`` is left out:
it installs Slurm; ``bench/slurm_e2e.py`` runs on the Docker cluster of tests/slurm (its slot
5)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from backends.local.sandbox import GATES
from tests.conftest import TEST_SLOT

ROOT = Path(__file__).resolve().parents[2]
# script: (arguments, environment, what its headline says)
BENCHES = {
    "admission.py": ([], {}, "admission pass, 10,000 waiting jobs"),
    "e2e.py": (["--no-slurm", "--jobs", "10"], {}, "one trivial job, submit -> SUCCEEDED"),
    "k8s_watch.py": ([], {"BENCH_LIVE": "100", "BENCH_SAMPLES": "3"}, "the pass it wakes"),
    "list.py": ([], {"BENCH_JOBS": "300", "BENCH_SECONDS": "1"}, "median list latency"),
    "pages.py": ([], {"BENCH_JOBS": "200", "BENCH_ROUNDS": "5"}, "worst median"),
    "protocol.py": ([], {}, "seed 000 jobs per second"),
    "reconcile.py": ([], {}, "one reconcile pass over 10,000 live tasks"),
    "sandbox.py": ([], {"BENCH_RUNS": "3"}, "the sandbox costs a task start"),
    "slurm_e2e.py": (["--jobs", "4", "--slot", "5"], {"BENCH_RUNS": "2"}, "on Slurm / plain"),
    "submit.py": ([], {"BENCH_SECONDS": "1"}, "submissions per second"),
}


# Where the benchmarks' databases go when the suite itself runs on SQLite (make test without
# DATABASE_URL): the local PostgreSQL the README names. They measure PostgreSQL either way.
LOCAL_POSTGRES = "postgres://postgres@127.0.0.1:5432"


def server_url() -> str:
    """``postgres://user@host:port`` of the tests' database, or of the local PostgreSQL on a
    SQLite run; a skip (a failure in CI) where none answers."""
    database = settings.DATABASES["default"]
    if database["ENGINE"] == "django.db.backends.postgresql":
        user, host, port = database["USER"], database["HOST"], database["PORT"]
        return f"postgres://{user}@{host}:{port}"
    url = os.environ.get("BENCH_PG", LOCAL_POSTGRES)
    answers = subprocess.run(["psql", f"{url}/postgres", "-qc", "select 1"], capture_output=True)
    if answers.returncode != 0:
        missing = f"the benchmarks measure PostgreSQL, and none answers at {url}"
        if os.environ.get("CI") == "true":
            pytest.fail(missing)
        pytest.skip(missing)
    return url


DOCKER = ("/run/docker/", "/var/lib/docker/")  # the engine's own: containers of other tests


def mount_points() -> set[str]:
    """What is mounted now, but what Docker mounts for containers (the Slurm bench's, or
    those of another test run on this machine)."""
    mounted = {line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()}
    return {point for point in mounted if not point.startswith(DOCKER)}


def gates() -> set[str]:
    """The sandboxes' mount gates on this host (``backends.local.sandbox.GATES``)."""
    return {entry.name for entry in GATES.iterdir()} if GATES.is_dir() else set()


@pytest.mark.parametrize("script", sorted(BENCHES))
def test_the_benchmark_runs_and_prints_its_headline(script: str, tmp_path: Path) -> None:
    server = server_url()
    arguments, knobs, headline = BENCHES[script]
    # a database of this run's own: a run beside it (TEST_SLOT) would drop it under this one
    name = f"test_bench_{script.removesuffix('.py')}{TEST_SLOT or ''}"
    env = {
        **os.environ,
        **knobs,
        "BENCH_PG": server,
        "BENCH_DB": name,
        "BENCH_REDIS": "redis://127.0.0.1:6379/14",
        "BENCH_VAR_DIR": str(tmp_path),
    }
    mounted_before, gates_before = mount_points(), gates()
    try:
        done = subprocess.run(
            [sys.executable, f"bench/{script}", *arguments],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert headline in done.stdout, done.stdout[-2000:]
        # Nothing left mounted of its tasks' file systems (each would hold a loop device).
        assert mount_points() <= mounted_before, mount_points() - mounted_before
        assert gates() <= gates_before, gates() - gates_before  # nor a gate, run after run
    finally:
        drop = f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"
        subprocess.run(["psql", f"{server}/postgres", "-qc", drop], check=False)
