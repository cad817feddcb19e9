"""The local backend's task wrapper (``backends/local/wrapper.c``), run as the launch runs it
(``process.spawn_detached``): what a task starts with, and what the wrapper leaves when it ends.
The backend's own tests (``test_local*.py``, ``test_limits.py``) cover the logs, their cap,
stops and the watch through ``LocalBackend``."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from backends.local import process
from backends.local.process import WRAPPER, spawn_detached
from tests.waiting import wait_for


def task_dir(root: Path) -> Path:
    """``<root>/<attempt>/<task>`` with the root's ``.ended``, as the backend lays them out."""
    (root / ".ended").mkdir(parents=True, exist_ok=True)
    work = root / "job-a0" / "worker-0"
    work.mkdir(parents=True)
    return work


def run(work: Path, command: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run ``command`` under the wrapper and wait for its end: its exit code and stdout."""
    spawn_detached(work, env or {"PATH": "/usr/bin:/bin"}, 1 << 20, command)
    wait_for(lambda: (work / "exit_code").exists() and (work / "exit_code").read_text() != "")
    return int((work / "exit_code").read_text()), (work / "stdout.log").read_text()


def test_the_wrapper_is_built_by_make_install() -> None:
    assert os.access(WRAPPER, os.X_OK), f"{WRAPPER} is missing: `make install` builds it"


def test_the_task_gets_its_environment_and_nothing_more(tmp_path: Path) -> None:
    work = task_dir(tmp_path)
    code, out = run(work, ["/usr/bin/env"], {"PATH": "/usr/bin:/bin", "ONLY": "this"})
    assert code == 0
    assert sorted(out.splitlines()) == ["ONLY=this", "PATH=/usr/bin:/bin"]


def test_the_task_leads_a_session_of_its_own_with_stdin_empty_and_interrupts_ignored(
    tmp_path: Path,
) -> None:
    """Its own session, so that a stop to its group never reaches the wrapper; SIGINT and
    SIGQUIT ignored, as the commands of a shell's background job always were here."""
    work = task_dir(tmp_path)
    script = (
        'set -- $(cut -d" " -f6 /proc/$$/stat); echo "session $1 pid $$"; '
        "grep SigIgn /proc/$$/status; cat; echo read-done"
    )
    code, out = run(work, ["/bin/sh", "-c", script])
    assert code == 0
    session, pid = out.split()[1], out.split()[3]
    assert session == pid
    ignored = int(out.split("SigIgn:")[1].split()[0], 16)
    assert ignored & (1 << (signal.SIGINT - 1)) and ignored & (1 << (signal.SIGQUIT - 1))
    assert out.endswith("read-done\n")  # stdin at its end at once: /dev/null


def test_a_task_killed_by_a_signal_ends_with_128_plus_its_number(tmp_path: Path) -> None:
    work = task_dir(tmp_path)
    code, _ = run(work, ["/bin/sh", "-c", "kill -s USR1 $$"])
    assert code == 128 + signal.SIGUSR1


def test_the_end_is_marked_with_the_tasks_name_once_the_exit_code_is_written(
    tmp_path: Path,
) -> None:
    work = task_dir(tmp_path)
    run(work, ["/bin/true"])
    wait_for(lambda: (tmp_path / ".ended" / "job-a0+worker-0").exists())


@pytest.mark.parametrize("command", ["sh", "./bootstrap.sh"])
def test_a_command_is_run_by_its_path_and_never_looked_up_in_the_tasks_path(
    tmp_path: Path, command: str
) -> None:
    """The wrapper may run as root and the task's environment is the job's: a PATH of the job's
    must not choose what runs before the sandbox does."""
    work = task_dir(tmp_path)
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    (decoy / "sh").write_text("#!/bin/sh\ntouch decoy-ran\n")
    (decoy / "sh").chmod(0o755)
    code, _ = run(work, [command, "-c", "true"], {"PATH": str(decoy)})
    assert code == 127
    assert f"[portal] could not run {command}" in (work / "stderr.log").read_text()
    assert not (work / "decoy-ran").exists()


def test_the_launch_waits_for_the_pids_only_not_for_the_task(tmp_path: Path) -> None:
    work = task_dir(tmp_path)
    wrapper, task = spawn_detached(work, {"PATH": "/bin"}, 1024, ["/bin/sleep", "300"])
    try:
        assert task is not None
        wait_for(lambda: os.getpgid(task) == task)  # its own group once it has run setsid
        assert not (work / "exit_code").exists()
        assert os.getsid(wrapper) == wrapper != os.getsid(0)  # detached from the launch
    finally:
        os.killpg(task, signal.SIGKILL)
    wait_for(lambda: (work / "exit_code").exists() and (work / "exit_code").read_text() != "")
    assert (work / "exit_code").read_text() == str(128 + signal.SIGKILL)


def test_a_missing_wrapper_is_a_clear_error(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(process, "WRAPPER", tmp_path / "portal-task-wrapper")
    with pytest.raises(OSError, match="make install"):
        spawn_detached(task_dir(tmp_path), {}, 1024)
