"""The Slurm task wrapper (``backends/slurm/script.py``'s ``WRAPPER``), run here by /bin/sh as
``srun`` runs it on a node: it publishes an address with free ports, runs the bootstrap with
its logs, passes a stop on with the grace, and records the exit code and an event."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from backends.slurm.script import WRAPPER
from tests.waiting import wait_for


@pytest.fixture(autouse=True)
def no_task_left(tmp_path: Path) -> Iterator[None]:
    """Kill what a failed test left running in its directory (the bootstrap runs in a session
    of its own, out of the wrapper's reach once the wrapper is gone)."""
    yield
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and (proc / "cwd").resolve().is_relative_to(tmp_path):
                os.kill(int(proc.name), signal.SIGKILL)
        except OSError:
            continue


def stage(root: Path, bootstrap: str, ports: str = "") -> Path:
    task = root / "job1-a0" / "worker-0"
    task.mkdir(parents=True)
    (root / ".ended").mkdir()
    (root / "job1-a0" / "task.sh").write_text(WRAPPER)
    (task / "bootstrap.sh").write_text(bootstrap)
    (task / "ports").write_text(ports)
    return task


def start(task: Path, grace: int = 2, procid: str = "0") -> subprocess.Popen[bytes]:
    attempt = task.parent
    env = {"PATH": os.environ["PATH"], "SLURM_PROCID": procid, "SLURM_JOB_ID": "77"}
    return subprocess.Popen(
        ["/bin/sh", str(attempt / "task.sh"), str(attempt), "worker", str(grace)], env=env
    )


def test_a_task_publishes_free_ports_runs_and_records_its_exit(tmp_path: Path) -> None:
    task = stage(tmp_path, "echo out; echo err >&2; exit 3\n", ports="http 2\nssh 1\n")
    assert start(task).wait(30) == 0
    address = json.loads((task / "address.json").read_text())
    ports = address["ports"]
    assert sorted(ports) == ["http", "ssh"] and len(ports["http"]) == 2
    chosen = ports["http"] + ports["ssh"]
    assert len(set(chosen)) == 3
    assert all(30000 <= p < 50000 for p in chosen)
    assert address["job"] == "77" and address["ip"]
    assert (task / "exit").read_text().strip() == "3"
    assert (task / "stdout.log").read_text() == "out\n"
    assert (task / "stderr.log").read_text() == "err\n"
    assert (tmp_path / ".ended" / "job1-a0+worker-0").exists()


def test_the_task_index_comes_from_slurm_procid(tmp_path: Path) -> None:
    task = stage(tmp_path, "exit 0\n")
    other = task.parent / "worker-1"
    other.mkdir()
    (other / "bootstrap.sh").write_text("exit 5\n")
    (other / "ports").write_text("")
    assert start(task, procid="1").wait(30) == 0
    assert (other / "exit").read_text().strip() == "5"
    assert not (task / "exit").exists()


@pytest.mark.parametrize("how", ["signal", "stop file"])
def test_a_stop_terminates_the_task_then_kills_it_after_the_grace(tmp_path: Path, how: str) -> None:
    # The bootstrap ignores SIGTERM: only the wrapper's SIGKILL after the grace ends it.
    task = stage(tmp_path, "trap '' TERM\necho started\nwhile :; do sleep 0.1; done\n")
    wrapper = start(task, grace=1)
    wait_for(lambda: (task / "stdout.log").exists() and (task / "stdout.log").read_text())
    stopped_at = time.monotonic()
    if how == "signal":
        wrapper.send_signal(signal.SIGTERM)  # what scancel --signal=TERM does to the step
    else:
        (task / "stop").write_text("")
    assert wrapper.wait(30) == 0
    assert time.monotonic() - stopped_at >= 1  # not before the grace
    assert (task / "exit").read_text().strip() == "137"


def test_a_task_that_handles_sigterm_exits_with_its_own_code(tmp_path: Path) -> None:
    task = stage(tmp_path, "trap 'exit 143' TERM\necho started\nwhile :; do sleep 0.1; done\n")
    wrapper = start(task, grace=30)
    wait_for(lambda: (task / "stdout.log").exists() and (task / "stdout.log").read_text())
    wrapper.send_signal(signal.SIGTERM)
    assert wrapper.wait(20) == 0
    assert (task / "exit").read_text().strip() == "143"


def test_a_task_stopped_before_it_started_never_runs(tmp_path: Path) -> None:
    task = stage(tmp_path, "touch ran\n")
    (task / "stop").write_text("")
    assert start(task).wait(30) == 0
    assert (task / "exit").read_text().strip() == "143"
    assert not (task / "ran").exists() and not (task / "address.json").exists()
