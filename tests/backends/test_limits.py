"""The kernel's limits of a local task (``backends/local/cgroups.py``, ``disk.py``,
``limits.py``): each holds on this host's cgroup hierarchy (v1 here, v2 in the VM of
``tests/vm``), each ends a task that meets it as FAILED with a reason that names it, and where
one cannot be enforced another user's task is refused, never run unlimited."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from backends.base import TaskPhase
from backends.exits import describe_exit
from backends.local import LocalBackend, LocalBackendError, cgroups, disk
from backends.local import backend as local_backend
from backends.local.sandbox import SandboxConfig, sandbox_init
from tests.support.local_tasks import record_pid, task, wait_until_ended, without_pids
from tests.waiting import wait_for

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="the kernel's limits need root")
EXPECTED_CGROUP = os.environ.get("PORTAL_EXPECT_CGROUP")  # "2" inside the VM of tests/vm


def ended(backend: LocalBackend, ref: str, timeout: float = 60.0) -> str:
    """The diagnostics of the task ``ref`` once it has FAILED."""
    assert wait_until_ended(backend, ref, timeout) == TaskPhase.FAILED
    return backend.observe([ref])[ref].diagnostics


@as_root
def test_the_host_limits_memory_cpu_pids_and_disk_on_its_cgroup_hierarchy(tmp_path: Path):
    backend = LocalBackend(tmp_path / "tasks")
    hierarchy = backend.hierarchy
    assert hierarchy.controllers == ("memory", "cpu", "pids"), backend.describe_limits()
    if EXPECTED_CGROUP:
        assert hierarchy.version == int(EXPECTED_CGROUP)
    assert backend.host_limits.unlimited(backend.sandbox) == []
    assert backend.describe_limits()[0] == (
        f"cgroup v{hierarchy.version}: memory, cpu, pids limited per task"
    )


@as_root
def test_a_task_runs_in_a_cgroup_of_its_memory_cpu_and_pids(tmp_path: Path):
    backend = LocalBackend(tmp_path / "tasks", sandbox_config=SandboxConfig(pids_max=300))
    ref = backend.launch(task("sleep 30"))  # memoryMB 256, cpu 1
    try:
        pid = wait_for(lambda: sandbox_init(tmp_path / "tasks" / ref, record_pid(backend, ref)))
        groups = Path(f"/proc/{pid}/cgroup").read_text()
        name = ref.replace("/", ".")
        assert f"/portal-tasks/{name}" in groups
        root = backend.hierarchy.root
        memory = str(256 * 1024 * 1024)
        if backend.hierarchy.version == 2:
            path = root / "portal-tasks" / name
            assert (path / "memory.max").read_text().strip() == memory
            assert (path / "memory.swap.max").read_text().strip() == "0"
            assert (path / "cpu.max").read_text().split() == ["100000", "100000"]
            assert (path / "pids.max").read_text().strip() == "300"
        else:
            path = root / "memory" / "portal-tasks" / name
            assert (path / "memory.limit_in_bytes").read_text().strip() == memory
            assert (root / "cpu/portal-tasks" / name / "cpu.cfs_quota_us").read_text() == "100000\n"
            assert (root / "pids/portal-tasks" / name / "pids.max").read_text() == "300\n"
    finally:
        backend.stop([ref])


@as_root
def test_the_cgroup_lock_is_taken_early_by_rejoining_the_cgroup_one_is_in(tmp_path: Path):
    """A task's join waits for the kernel's cgroup lock; the launch takes it first, on a thread,
    by writing the worker into its own cgroup, which moves nothing."""
    backend = LocalBackend(tmp_path / "tasks")
    own = cgroups.own_procs(backend.hierarchy)
    assert own is not None and own.is_file()
    where = Path("/proc/self/cgroup").read_text()
    assert cgroups.rejoin(own)
    assert Path("/proc/self/cgroup").read_text() == where
    assert os.getpid() in {int(pid) for pid in own.read_text().split()}


@as_root
def test_a_sandboxed_launch_takes_the_cgroup_lock_after_making_the_cgroups_and_before_the_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Making a cgroup waits for the lock while the rejoin holds it: taken before the task's
    cgroups are made, the rejoin's wait would be the launch's (and the pass's) again."""
    steps, warmed = [], []
    create, warm, spawn = cgroups.create, cgroups.warm_attach, local_backend.spawn_detached

    def made(*args: object, **kwargs: object) -> list[Path]:
        steps.append("cgroups")
        return create(*args, **kwargs)  # type: ignore[arg-type]

    def warm_attach(hierarchy: cgroups.Hierarchy) -> object:
        steps.append("lock")
        warmed.append(warm(hierarchy))
        return warmed[-1]

    def spawn_detached(*args: object, **kwargs: object) -> tuple[int, int | None]:
        steps.append("start")
        return spawn(*args, **kwargs)

    monkeypatch.setattr(cgroups, "create", made)
    monkeypatch.setattr(cgroups, "warm_attach", warm_attach)
    monkeypatch.setattr(local_backend, "spawn_detached", spawn_detached)
    backend = LocalBackend(tmp_path / "tasks")
    ref = backend.launch(task("true"))
    assert wait_until_ended(backend, ref) == TaskPhase.SUCCEEDED
    assert steps == ["cgroups", "lock", "start"]
    assert warmed[0] is not None and warmed[0].result(10) is True


def test_the_v2_files_of_a_task_are_written_as_the_kernel_reads_them(tmp_path: Path):
    """The unified hierarchy's files (the kernel's own are checked in the VM): a fake root."""
    hierarchy = cgroups.Hierarchy(2, tmp_path, ("memory", "cpu", "pids"))
    (tmp_path / "portal-tasks").mkdir()
    (procs,) = cgroups.create(hierarchy, "job-1-a1/worker-0", cgroups.Limits(512, 2, 100))
    path = tmp_path / "portal-tasks" / "job-1-a1.worker-0"
    assert procs == path / "cgroup.procs"
    assert (path / "memory.max").read_text() == str(512 * 1024 * 1024)
    assert (path / "memory.oom.group").read_text() == "1"
    assert (path / "cpu.max").read_text() == "200000 100000"
    assert (path / "pids.max").read_text() == "100"
    (path / "memory.events").write_text("low 0\nhigh 0\nmax 9\noom 2\noom_kill 2\n")
    (path / "pids.events").write_text("max 17\n")
    events = cgroups.events(hierarchy, "job-1-a1/worker-0")
    assert events == cgroups.Events(oom_kills=2, pids_max=17)


@as_root
def test_without_a_controller_another_users_task_is_refused_and_an_admins_runs(tmp_path: Path):
    backend = LocalBackend(tmp_path / "tasks")
    backend.__dict__["host_limits"] = without_pids(backend)
    with pytest.raises(LocalBackendError, match="cannot limit the pids of a task"):
        backend.launch(task("true"))
    assert "pids NOT limited" in " ".join(backend.describe_limits())
    admins = backend.launch(task("true", owner_is_admin=True))
    assert wait_until_ended(backend, admins) == TaskPhase.SUCCEEDED
    allowed = LocalBackend(tmp_path / "tasks", sandbox_config=SandboxConfig(require_limits=False))
    allowed.__dict__["host_limits"] = backend.host_limits
    assert wait_until_ended(allowed, allowed.launch(task("true", index=1))) == TaskPhase.SUCCEEDED


@as_root
def test_a_fork_bomb_is_stopped_at_its_pids_limit(tmp_path: Path):
    backend = LocalBackend(tmp_path / "tasks", sandbox_config=SandboxConfig(pids_max=64))
    ref = backend.launch(task("bomb() { bomb | bomb & }; bomb; sleep 600"))
    diagnostics = ended(backend, ref)  # observing finds the refused forks and stops it
    assert diagnostics.startswith(
        "hit its limit of 64 processes and threads (LOCAL_TASK_PIDS_MAX) and was stopped whole"
    ), diagnostics


@as_root
def test_a_task_over_its_memory_is_killed_whole(tmp_path: Path):
    backend = LocalBackend(tmp_path / "tasks")
    hog = "python3 -c 'b = bytearray(700 * 1024 * 1024); print(len(b))'; echo after-the-hog"
    ref = backend.launch(task(hog))  # memoryMB 256
    diagnostics = ended(backend, ref)
    assert diagnostics.startswith("OOMKilled: the task went over its memoryMB (256 MB)")
    assert b"734003200" not in backend.read_log(ref, "stdout")


@as_root
def test_a_task_that_fills_its_disk_gets_no_space_and_fails_naming_its_limit(tmp_path: Path):
    free_before = shutil.disk_usage(tmp_path).free
    backend = LocalBackend(tmp_path / "tasks", sandbox_config=SandboxConfig(disk_mb=64))
    fill = "dd if=/dev/zero of={} bs=1M count=200 status=none"
    ref = backend.launch(task(f"{fill.format('big')} || exit 1; echo filled"))
    diagnostics = ended(backend, ref)
    assert diagnostics.startswith(
        "filled its disk limit of 64 MB (LOCAL_TASK_DISK_MB): No space left on device"
    ), diagnostics
    assert b"filled" not in backend.read_log(ref, "stdout")
    assert shutil.disk_usage(tmp_path).free > free_before - 80 * 1024 * 1024
    tmp = backend.launch(task(f"{fill.format('/tmp/big')} || exit 1", index=1))
    assert "No space left on device" in ended(backend, tmp)
    shm = backend.launch(task(f"{fill.format('/dev/shm/big')} || exit 1", index=2))
    assert "No space left on device" in ended(backend, shm)


@as_root
def test_the_working_directory_is_a_file_system_of_the_tasks_own(tmp_path: Path):
    backend = LocalBackend(tmp_path / "tasks", sandbox_config=SandboxConfig(disk_mb=32))
    ref = backend.launch(task("df -k . | tail -1; id -u; stat -c %u .; sleep 30"))
    work = backend.work_dir(ref)
    wait_for(lambda: backend.read_log(ref, "stdout").count(b"\n") >= 3)
    size, uid, owner = backend.read_log(ref, "stdout").decode().splitlines()
    assert 20_000 < int(size.split()[1]) <= 32 * 1024
    assert uid == owner
    assert os.path.ismount(work)
    backend.stop([ref])
    wait_until_ended(backend, ref)
    backend.cleanup([])
    assert not os.path.ismount(work) and not work.exists()


@as_root
def test_each_working_directory_is_a_fresh_copy_of_one_empty_file_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    made: list[str] = []
    run = disk._run
    monkeypatch.setattr(disk, "_run", lambda argv: (made.append(argv[0]), run(argv)))
    backend = LocalBackend(tmp_path / "tasks", sandbox_config=SandboxConfig(disk_mb=32))
    first = backend.launch(task("echo mine >left; ls -A; sleep 30"))
    wait_for(lambda: b"left" in backend.read_log(first, "stdout"))
    second = backend.launch(task("ls -A | wc -l; stat -c %u .; id -u; sleep 30", index=1))
    wait_for(lambda: backend.read_log(second, "stdout").count(b"\n") >= 3)
    entries, owner, uid = backend.read_log(second, "stdout").decode().split()
    assert entries == "0" and owner == uid  # nothing of the first's, no lost+found: its own
    assert made == ["mkfs.ext4"]  # made once, copied for each
    for ref in (first, second):
        image = backend.work_dir(ref).parent / disk.IMAGE
        assert image.stat().st_size == 32 * 1024 * 1024
        assert image.stat().st_blocks * 512 < 4 * 1024 * 1024  # its holes stay holes
    backend.stop([first, second])
    for ref in (first, second):
        wait_until_ended(backend, ref)


def test_a_task_holds_its_open_files_limit_soft_and_hard(tmp_path: Path):
    backend = LocalBackend(tmp_path / "tasks", sandbox_config=SandboxConfig(nofile=256))
    ref = backend.launch(task("ulimit -Sn; ulimit -Hn"))
    assert wait_until_ended(backend, ref) == TaskPhase.SUCCEEDED
    assert backend.read_log(ref, "stdout").split() == [b"256", b"256"]  # it cannot raise it


@as_root
def test_a_task_that_opens_a_million_files_fails_at_its_open_files_limit(tmp_path: Path):
    backend = LocalBackend(tmp_path / "tasks", sandbox_config=SandboxConfig(nofile=256))
    opener = "python3 -c 'import os; [os.open(\"/dev/null\", 0) for _ in range(10**6)]'"
    diagnostics = ended(backend, backend.launch(task(opener)))
    assert diagnostics.startswith(
        "hit its limit of 256 open files per process (LOCAL_TASK_NOFILE): Too many open files"
    ), diagnostics


def test_a_log_flood_is_capped_and_the_reason_says_so(tmp_path: Path):
    backend = LocalBackend(tmp_path / "tasks", log_max_bytes=1024 * 1024)
    ref = backend.launch(task("head -c 300000000 /dev/zero; exit 3"))
    diagnostics = ended(backend, ref)
    assert diagnostics.startswith(
        "wrote more than 1048576 bytes on stdout (LOCAL_TASK_LOG_MAX_BYTES): the rest was dropped"
    ), diagnostics
    log = backend.read_log(ref, "stdout")
    assert len(log) < 1024 * 1024 + 200
    assert log.endswith(
        b"[portal] log capped at 1048576 bytes: the rest of the output was dropped\n"
    )


def test_a_task_without_a_limit_met_keeps_its_exit_reason(tmp_path: Path):
    backend = LocalBackend(tmp_path / "tasks")
    diagnostics = ended(backend, backend.launch(task("echo plain failure >&2; exit 3")))
    assert diagnostics == describe_exit(3)


@as_root
def test_a_sandbox_holds_no_other_tasks_file_system(tmp_path: Path):
    backend = LocalBackend(tmp_path / "tasks", sandbox_config=SandboxConfig(disk_mb=32))
    first = backend.launch(task("sleep 30"))
    second = backend.launch(task("cat /proc/self/mountinfo; echo END; sleep 30", index=1))
    wait_for(lambda: b"END" in backend.read_log(second, "stdout"))
    assert disk.is_mount_point(backend.root)  # a mount of its own, detached in one call
    mounts = backend.read_log(second, "stdout").decode()
    assert str(backend.work_dir(second)) in mounts  # its own
    assert str(backend.work_dir(first)) not in mounts  # not even covered, as it once was
    backend.stop([first, second])
    for ref in (first, second):
        wait_until_ended(backend, ref)
    backend.cleanup([])  # no task file system left: the task root is a plain directory again
    assert not disk.is_mount_point(backend.root)
    shutil.rmtree(backend.root)  # as any directory (a mount point would be busy)


@as_root
def test_a_task_root_with_a_file_system_mounted_already_is_not_bound_over_it(tmp_path: Path):
    root = tmp_path / "tasks"
    (root / "earlier" / "work").mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "earlier", str(root / "earlier" / "work")], check=True)
    try:
        disk.bind_root(root)  # a bind of the root would hide the earlier one
        assert not disk.is_mount_point(root)
    finally:
        disk.unmount(root / "earlier" / "work")
    disk.bind_root(root)
    assert disk.is_mount_point(root)
    disk.release_all(root)
    assert not disk.is_mount_point(root) and not (root / disk.BOUND).exists()
