"""The local backend runs each task as a detached process group on this machine."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import TypeVar

import pytest

from backends.base import TaskLaunch, TaskPhase, TaskShape
from backends.local import DISAPPEARED, LocalBackend, LocalBackendError
from backends.local.process import TaskRecord, start_time_of
from backends.local.sandbox import SYSTEM_PATH, sandbox_init, signal_group
from tests.support.local_tasks import (
    launch,
    phase_of,
    record,
    record_pid,
    shell_output,
    wait_until_ended,
)
from tests.waiting import wait_for

T = TypeVar("T")


def process_state(pid: int) -> str | None:
    """The state letter of ``pid`` (``Z`` for a zombie), or None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2 :].split()[0]


def in_namespace_of(init: int) -> list[int]:
    """Host pids of the processes in the pid namespace of ``init`` (a sandbox's pid 1)."""
    try:
        namespace = os.readlink(f"/proc/{init}/ns/pid")
    except OSError:
        return []
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "ns" / "pid") == namespace:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def gone(pid: int) -> bool:
    return process_state(pid) in (None, "Z", "X")


def own_group(pid: int) -> bool:
    """Whether ``pid`` leads a process group of its own: a task does once it has run setsid,
    as the wrapper forks it (``backends/local/wrapper.c``)."""
    try:
        return os.getpgid(pid) == pid
    except ProcessLookupError:
        return False


def test_a_signal_just_after_the_launch_reaches_a_task_without_its_own_group_yet() -> None:
    """A stop that comes before the task has made its group is not lost: its lone process
    gets the signal (as the wrapper's child does between its fork and setsid)."""
    child = subprocess.Popen(["sleep", "300"])  # in this process's group, as such a task is
    try:
        start = start_time_of(child.pid)
        rec = TaskRecord(child.pid, child.pid, start, None, None, "2026-01-01T00:00:00+00:00")
        assert not own_group(child.pid)

        signal_group(rec, signal.SIGTERM)

        assert child.wait(timeout=10) == -signal.SIGTERM
    finally:
        child.kill()
        child.wait()


def test_a_task_that_exits_zero_succeeds_and_its_stdout_is_captured(
    backend: LocalBackend,
) -> None:
    ref = launch(backend, 'echo "hello $GREETING"\n', env={"GREETING": "world"})
    assert ref == "job-1-a1/worker-0"
    assert wait_until_ended(backend, ref) == TaskPhase.SUCCEEDED
    obs = backend.observe([ref])[ref]
    assert obs.exit_code == 0
    assert obs.diagnostics == ""
    assert obs.ip == "127.0.0.1" and obs.node
    assert obs.started_at is not None and obs.finished_at is not None
    assert backend.read_log(ref, "stdout") == b"hello world\n"


def test_a_task_that_exits_three_fails_with_that_code_and_its_stderr_is_kept_apart(
    backend: LocalBackend,
) -> None:
    ref = launch(backend, "echo out\necho err >&2\nexit 3\n")
    assert wait_until_ended(backend, ref) == TaskPhase.FAILED
    obs = backend.observe([ref])[ref]
    assert obs.exit_code == 3
    assert obs.diagnostics == "exited with code 3"
    assert backend.read_log(ref, "stdout") == b"out\n"
    assert backend.read_log(ref, "stderr") == b"err\n"


def test_the_script_gets_its_env_and_runs_in_its_working_directory(
    backend: LocalBackend, tmp_path: Path
) -> None:
    ref = launch(
        backend,
        'echo "$PAI_TASK_ROLE_NAME|$PAI_WORK_DIR|$(pwd)|$PATH"',
        env={"PAI_TASK_ROLE_NAME": "worker"},
    )
    assert wait_until_ended(backend, ref) == TaskPhase.SUCCEEDED
    workdir = str(backend.work_dir(ref))
    assert workdir == str(tmp_path / "tasks" / ref / "work")
    role, work_dir, cwd, path = backend.read_log(ref, "stdout").decode().strip().split("|")
    assert (role, work_dir, cwd) == ("worker", workdir, workdir)
    assert path == SYSTEM_PATH  # the system's, not the portal's (its virtualenv is hidden)
    assert (tmp_path / "tasks" / ref / "bootstrap.sh").read_text().startswith("echo")


def test_a_given_work_dir_is_kept_and_a_retry_gets_its_own_directory(
    backend: LocalBackend,
) -> None:
    ref = launch(backend, 'echo "$PAI_WORK_DIR"', retry=2, env={"PAI_WORK_DIR": "/elsewhere"})
    assert ref == "job-1-a1/worker-0-r2"
    wait_until_ended(backend, ref)
    assert backend.read_log(ref, "stdout") == b"/elsewhere\n"


def test_launching_the_same_task_twice_returns_the_same_ref_without_a_second_run(
    backend: LocalBackend,
) -> None:
    ref = launch(backend, "echo once >> runs.txt")
    assert launch(backend, "echo once >> runs.txt") == ref
    wait_until_ended(backend, ref)
    assert (backend.work_dir(ref) / "runs.txt").read_text() == "once\n"


def test_a_stale_finished_task_under_the_same_ref_is_replaced_by_a_new_script(
    backend: LocalBackend,
) -> None:
    ref = launch(backend, "echo old; touch old.txt")
    wait_until_ended(backend, ref)
    assert launch(backend, "echo new") == ref
    assert wait_until_ended(backend, ref) == TaskPhase.SUCCEEDED
    assert backend.read_log(ref, "stdout") == b"new\n"
    assert not (backend.work_dir(ref) / "old.txt").exists()


def test_a_running_task_is_never_replaced(backend: LocalBackend) -> None:
    ref = launch(backend, "sleep 30")
    try:
        with pytest.raises(LocalBackendError):
            launch(backend, "echo other")
        assert phase_of(backend, ref) == TaskPhase.RUNNING
    finally:
        backend.stop([ref])


def test_placement_gives_ports_unique_across_shapes_and_labels_with_counts_honoured(
    backend: LocalBackend,
) -> None:
    shapes = [
        TaskShape("master", 0, 1, 100, 0, {"http": 2, "ssh": 1}),
        TaskShape("worker", 0, 1, 100, 0, {"http": 3}),
        TaskShape("worker", 1, 1, 100, 0, {}),
    ]
    placements = backend.place("job-1-a1", shapes)
    assert [p.ip for p in placements] == ["127.0.0.1"] * 3
    assert [{k: len(v) for k, v in p.ports.items()} for p in placements] == [
        {"http": 2, "ssh": 1},
        {"http": 3},
        {},
    ]
    ports = [port for p in placements for group in p.ports.values() for port in group]
    assert len(ports) == len(set(ports)) == 6
    assert all(0 < port < 65536 for port in ports)


def test_placement_avoids_the_ports_of_live_tasks(backend: LocalBackend) -> None:
    placement = backend.place("job-1-a1", [TaskShape("w", 0, 1, 100, 0, {"http": 1})])[0]
    used = placement.ports["http"][0]
    ref = backend.launch(TaskLaunch("job-1-a1", "w", 0, 0, "sleep 30", {}, placement, 1, 100, 0))
    try:
        for _ in range(20):
            again = backend.place("job-2-a1", [TaskShape("w", 0, 1, 100, 0, {"http": 50})])[0]
            assert used not in again.ports["http"]
    finally:
        backend.stop([ref])


def test_stop_kills_the_whole_process_group_and_the_task_fails_with_a_signal(
    backend: LocalBackend, tmp_path: Path
) -> None:
    ref = launch(backend, "sleep 300 &\necho $! > child.pid\necho $$ > main.pid\nwait\n")
    workdir = backend.work_dir(ref)
    wait_for(lambda: (workdir / "child.pid").exists() and (workdir / "main.pid").exists())
    # The bootstrap is pid 2 of its sandbox, whose pid 1 is bwrap's init.
    assert wait_for(lambda: (workdir / "main.pid").read_text().strip()) == "2"
    assert phase_of(backend, ref) == TaskPhase.RUNNING
    pid = record(tmp_path / "tasks", ref)["pid"]
    assert isinstance(pid, int)
    init = sandbox_init(tmp_path / "tasks" / ref, pid)
    assert init is not None
    left = wait_for(lambda: len(in_namespace_of(init)) >= 2 and in_namespace_of(init))

    backend.stop([ref])
    backend.stop([ref])  # idempotent

    wait_for(lambda: all(gone(p) for p in left) and gone(pid))
    assert wait_until_ended(backend, ref) == TaskPhase.FAILED
    obs = backend.observe([ref])[ref]
    assert obs.exit_code == 128 + signal.SIGTERM
    assert obs.diagnostics == "killed by signal 15 (SIGTERM) after a stop request"
    assert record(tmp_path / "tasks", ref)["stop_requested_at"]


def test_stop_escalates_to_sigkill_for_a_task_that_ignores_sigterm(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path / "tasks", stop_grace_seconds=0.5)
    ref = launch(backend, "trap 'echo got TERM' TERM\necho ready\nwhile :; do sleep 0.1; done\n")
    wait_for(lambda: backend.read_log(ref, "stdout") == b"ready\n")
    backend.stop([ref])
    # stop never waits for the grace period: had it waited and killed, the task would be over
    assert phase_of(backend, ref) == TaskPhase.RUNNING
    wait_for(lambda: b"got TERM" in backend.read_log(ref, "stdout"))
    assert phase_of(backend, ref) == TaskPhase.RUNNING  # still within the grace period
    assert wait_until_ended(backend, ref) == TaskPhase.FAILED  # observe sends SIGKILL
    obs = backend.observe([ref])[ref]
    assert obs.exit_code == 128 + signal.SIGKILL
    assert obs.diagnostics.startswith("killed by signal 9 (SIGKILL)")


def test_a_fresh_backend_finds_a_task_started_by_another_instance(tmp_path: Path) -> None:
    first = LocalBackend(tmp_path / "tasks")
    ref = launch(first, "while [ ! -e go ]; do sleep 0.05; done\necho done\n")
    restarted = LocalBackend(tmp_path / "tasks")
    obs = restarted.observe([ref])[ref]
    assert obs.phase == TaskPhase.RUNNING
    assert obs.started_at is not None
    (restarted.work_dir(ref) / "go").touch()
    assert wait_until_ended(restarted, ref) == TaskPhase.SUCCEEDED
    assert restarted.read_log(ref, "stdout") == b"done\n"


def test_a_task_killed_with_its_wrapper_is_reported_as_disappeared(
    backend: LocalBackend, tmp_path: Path
) -> None:
    ref = launch(backend, "sleep 300\n")
    rec = record(tmp_path / "tasks", ref)
    assert isinstance(rec["wrapper_pid"], int) and isinstance(rec["pgid"], int)
    wait_for(lambda: own_group(rec["pgid"]))
    os.killpg(rec["wrapper_pid"], signal.SIGKILL)  # as the OOM killer or a reboot would
    os.killpg(rec["pgid"], signal.SIGKILL)
    assert wait_until_ended(backend, ref) == TaskPhase.FAILED
    obs = backend.observe([ref])[ref]
    assert obs.exit_code is None
    assert obs.diagnostics == DISAPPEARED
    assert not (tmp_path / "tasks" / ref / "exit_code").exists()


def test_an_exit_code_made_but_not_yet_written_is_no_end(
    backend: LocalBackend, tmp_path: Path
) -> None:
    """The wrapper writes the code in place: a reader may find the file empty for an instant.
    That is a task still running while its wrapper lives, and one that disappeared once the
    wrapper is gone without writing it, never an unreadable exit code."""
    ref = launch(backend, "sleep 300\n")
    rec = record(tmp_path / "tasks", ref)
    assert isinstance(rec["wrapper_pid"], int) and isinstance(rec["pgid"], int)
    # In its sandbox (its cgroups joined) first: a look at a task whose exit code is there
    # reads its cgroups' counts and removes them, as the task has ended.
    wait_for(lambda: sandbox_init(tmp_path / "tasks" / ref, rec["pgid"]) is not None)
    (tmp_path / "tasks" / ref / "exit_code").touch()
    assert backend.observe([ref])[ref].phase == TaskPhase.RUNNING
    os.killpg(rec["wrapper_pid"], signal.SIGKILL)
    os.killpg(rec["pgid"], signal.SIGKILL)
    wait_for(lambda: backend.observe([ref])[ref].phase != TaskPhase.RUNNING)
    obs = backend.observe([ref])[ref]
    assert (obs.phase, obs.diagnostics) == (TaskPhase.FAILED, DISAPPEARED)


def test_processes_left_behind_by_a_finished_script_are_killed(
    backend: LocalBackend, tmp_path: Path
) -> None:
    script = "sleep 300 &\nsetsid sleep 301 &\nnohup sleep 302 >/dev/null 2>&1 &\n"
    ref = launch(backend, script + "while [ ! -e go ]; do sleep 0.05; done\n")
    init = wait_for(lambda: sandbox_init(tmp_path / "tasks" / ref, record_pid(backend, ref)))
    left = wait_for(lambda: len(in_namespace_of(init)) >= 5 and in_namespace_of(init))
    (backend.work_dir(ref) / "go").touch()
    assert wait_until_ended(backend, ref) == TaskPhase.SUCCEEDED
    wait_for(lambda: all(gone(pid) for pid in left))


def test_a_finished_task_leaves_no_zombie_behind(backend: LocalBackend, tmp_path: Path) -> None:
    ref = launch(backend, "echo $$ > main.pid\nsleep 0.2\n")
    rec = record(tmp_path / "tasks", ref)
    main, wrapper = rec["pid"], rec["wrapper_pid"]
    assert isinstance(main, int) and isinstance(wrapper, int)
    pid_file = backend.work_dir(ref) / "main.pid"
    assert int(wait_for(lambda: pid_file.exists() and pid_file.read_text().strip())) == 2
    stat = Path(f"/proc/{wrapper}/stat").read_text()
    assert int(stat[stat.rfind(")") + 2 :].split()[1]) != os.getpid()  # not our child
    assert wait_until_ended(backend, ref) == TaskPhase.SUCCEEDED
    wait_for(lambda: process_state(main) is None)  # reaped by its wrapper, not a zombie


def test_unknown_and_malformed_refs_are_gone(backend: LocalBackend) -> None:
    seen = backend.observe(["job-9-a1/worker-0", "../x", "/etc/passwd", ""])
    assert {obs.phase for obs in seen.values()} == {TaskPhase.GONE}
    assert len(seen) == 4
    backend.stop(["job-9-a1/worker-0", "../x"])  # ignored


def test_read_log_gives_the_tail_and_nothing_for_a_missing_log(backend: LocalBackend) -> None:
    ref = launch(backend, "printf 0123456789")
    wait_until_ended(backend, ref)
    assert backend.read_log(ref, "stdout", tail_bytes=4) == b"6789"
    assert backend.read_log(ref, "stdout", tail_bytes=100) == b"0123456789"
    assert backend.read_log(ref, "stderr") == b""
    assert backend.read_log("job-9-a1/worker-0", "stdout") == b""


@pytest.mark.parametrize("ref", ["../x", "job-1-a1/../../x", "/etc/passwd", "a/b/c", ".."])
def test_read_log_rejects_refs_outside_the_root(backend: LocalBackend, ref: str) -> None:
    with pytest.raises(ValueError):
        backend.read_log(ref, "stdout")


def test_read_log_rejects_an_unknown_stream(backend: LocalBackend) -> None:
    with pytest.raises(ValueError):
        backend.read_log("job-1-a1/worker-0", "exit_code")


def test_capacity_reports_this_machine(backend: LocalBackend) -> None:
    capacity = backend.capacity()
    assert capacity.cpu == os.cpu_count()
    assert capacity.memory_mb > 0


@pytest.mark.django_db
def test_capacity_is_what_an_admin_set_with_local_cpus_and_local_memory_mb(settings) -> None:
    """A 3-task job could never run on a 2-core box, though its tasks mostly sleep (issue 27):
    LOCAL_CPUS and LOCAL_MEMORY_MB set the node's capacity admission counts, and the nodes
    page shows it."""
    from django.test import Client

    from clusters import capacity, registry
    from tests.conftest import make_user

    settings.LOCAL_CPUS, settings.LOCAL_MEMORY_MB = 96, 123_456
    registry.get_backend.cache_clear()
    backend = registry.get_backend()
    assert (backend.capacity().cpu, backend.capacity().memory_mb) == (96, 123_456)
    capacity.refresh(backend)
    web = Client()
    web.force_login(make_user("root", is_staff=True))
    assert "Total: 96 CPU," in web.get("/manage/nodes/").content.decode()
    settings.LOCAL_CPUS = settings.LOCAL_MEMORY_MB = 0  # unset: this machine's
    registry.get_backend.cache_clear()
    assert registry.get_backend().capacity().cpu == os.cpu_count()


@pytest.mark.usefixtures("two_gpus")
def test_tasks_get_distinct_free_gpus_and_cpu_tasks_see_none(backend: LocalBackend) -> None:
    assert backend.capacity().gpus == {"Tesla T4": 2}
    # The host's index, and CUDA's in the sandbox (which holds the task's GPU alone).
    script = 'echo "[$NVIDIA_VISIBLE_DEVICES/$CUDA_VISIBLE_DEVICES]"\n'
    script += "while [ ! -e go ]; do sleep 0.05; done\n"
    first = launch(backend, script, index=0, gpu=1)
    second = launch(backend, script, index=1, gpu=1)
    cpu_only = launch(backend, script, index=2, gpu=0)
    with pytest.raises(LocalBackendError):
        launch(backend, script, index=3, gpu=1)
    for ref in (first, second, cpu_only):
        wait_for(lambda ref=ref: backend.read_log(ref, "stdout"))  # type: ignore[misc]
    logs = {ref: backend.read_log(ref, "stdout") for ref in (first, second, cpu_only)}
    assert sorted([logs[first], logs[second]]) == [b"[0/0]\n", b"[1/0]\n"]
    assert logs[cpu_only] == b"[void/]\n"
    for ref in (first, second, cpu_only):
        (backend.work_dir(ref) / "go").touch()
        wait_until_ended(backend, ref)
    fourth = launch(backend, script, index=3, gpu=2)  # the GPUs are free again
    assert backend.read_log(fourth, "stdout") in (b"", b"[0,1/0,1]\n")
    backend.stop([fourth])


def test_task_directories_and_files_are_private_to_the_portals_user(tmp_path: Path):
    """Bootstrap scripts have secrets rendered in; logs print them. Nothing under the root is
    readable by another user of the machine: directories 700, files 600, also those the task
    writes itself."""
    root = tmp_path / "tasks"
    backend = LocalBackend(root)
    ref = launch(backend, "echo PASSWORD=s3cret; echo oops >&2; echo mine > made.txt; exit 3")
    assert wait_until_ended(backend, ref) == TaskPhase.FAILED
    workdir = root / ref
    # As root, the task's own uid passes through (0711) to its working directory, its own.
    passable = 0o711 if os.geteuid() == 0 else 0o700
    for directory in (root, workdir.parent, workdir):
        assert directory.stat().st_mode & 0o777 == passable, directory
    assert (workdir / "work").stat().st_mode & 0o777 == 0o700
    names = ["bootstrap.sh", "task.json", "stdout.log", "stderr.log", "exit_code", "work/made.txt"]
    for name in names:
        assert (workdir / name).stat().st_mode & 0o777 == 0o600, name
    assert not [p for p in workdir.rglob("*") if p.stat().st_mode & 0o077], "group/other bits"


def test_the_terminal_shell_writes_private_files_too(tmp_path: Path):
    backend = LocalBackend(tmp_path)
    ref = launch(backend, "sleep 30")
    wait_for(lambda: phase_of(backend, ref) == TaskPhase.RUNNING)
    shell_output(backend, ref, b"echo typed > typed.txt; echo done-$((6*7))\n", b"done-42")
    assert (backend.work_dir(ref) / "typed.txt").stat().st_mode & 0o777 == 0o600
