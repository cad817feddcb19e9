"""The local backend's sandbox (``backends/local/sandbox.py``): GPUs by device node, the
terminal inside the task's sandbox, and no task of an ordinary user without bwrap."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from backends.base import TaskPhase
from backends.local import LocalBackend, LocalBackendError, disk
from backends.local.gpus import GPU
from backends.local.sandbox import SandboxConfig, bwrap_args, covered, sandbox_init
from clusters import registry
from jobs import lifecycle
from jobs.models import Task
from jobs.states import JobState
from tests.jobs.helpers import settle
from tests.jobs.samples import hello_job
from tests.support.local_tasks import phase_of, record_pid, shell_output, task, wait_until_ended
from tests.waiting import wait_for


@pytest.fixture
def fake_dev() -> Iterator[Path]:
    """Two GPUs' device nodes and the control node, as files where any uid may pass."""
    path = Path(tempfile.mkdtemp(prefix="fake-dev-", dir="/var/tmp"))  # noqa: S108
    path.chmod(0o755)
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-fake-other"):
        (path / name).write_text(name)
        (path / name).chmod(0o644)
    yield path
    shutil.rmtree(path)


def test_bwrap_binds_only_the_device_nodes_of_the_tasks_gpus(fake_dev: Path):
    config = SandboxConfig(dev_dir=fake_dev)
    one = [GPU(1, "Tesla T4", "", "", minor=1)]
    args = bwrap_args(config, "/bin", Path("/w"), Path("/w.sh"), one, [], 64, passwd=False)
    binds = [args[i + 1 : i + 3] for i, arg in enumerate(args) if arg == "--dev-bind"]
    assert binds == [
        [f"{fake_dev}/nvidia1", "/dev/nvidia1"],
        [f"{fake_dev}/nvidiactl", "/dev/nvidiactl"],
    ]
    no_gpu = bwrap_args(config, "/bin", Path("/w"), Path("/w.sh"), [], [], 64, passwd=False)
    assert "--dev-bind" not in no_gpu


@pytest.mark.usefixtures("two_gpus")
def test_a_task_sees_the_device_nodes_of_its_gpus_and_no_other(tmp_path: Path, fake_dev: Path):
    backend = LocalBackend(tmp_path / "tasks", sandbox_config=SandboxConfig(dev_dir=fake_dev))
    first = backend.launch(task("ls /dev | grep nvidia; sleep 30", gpu=1))
    second = backend.launch(task("ls /dev | grep nvidia", gpu=1, index=1))
    assert wait_until_ended(backend, second) == TaskPhase.SUCCEEDED
    wait_for(lambda: backend.read_log(first, "stdout"))
    seen = {backend.read_log(ref, "stdout").decode() for ref in (first, second)}
    assert seen == {"nvidia0\nnvidiactl\n", "nvidia1\nnvidiactl\n"}
    backend.stop([first])


def test_the_terminal_lands_in_the_tasks_sandbox_as_its_uid(tmp_path: Path):
    backend = LocalBackend(tmp_path / "tasks")
    ref = backend.launch(task("sleep 30"))
    wait_for(lambda: phase_of(backend, ref) == TaskPhase.RUNNING)
    manage_py = Path(__file__).resolve().parents[2] / "manage.py"
    text = shell_output(
        backend,
        ref,
        f"echo uid=$(id -u) pwd=$(pwd) procs=$(ls /proc | grep -c '^[0-9]');"
        f" cat {manage_py} || echo no-portal-tree; echo end-$((6*7))\n".encode(),
        b"end-42",
    )
    uid = 200_003 if os.geteuid() == 0 else os.geteuid()  # LOCAL_TASK_UID_BASE + owner 3
    assert f"uid={uid} pwd={backend.work_dir(ref)} procs=" in text
    procs = int(text.split("procs=")[-1].split()[0])
    assert procs < 10  # the sandbox's own: init, the task, the shell and its commands
    assert "no-portal-tree" in text.split("end-42")[0]


def test_without_bwrap_an_ordinary_users_task_is_refused_and_says_why(tmp_path: Path):
    backend = LocalBackend(tmp_path, sandbox_config=SandboxConfig(bwrap="/nonexistent/bwrap"))
    with pytest.raises(LocalBackendError, match=r"bwrap \(the Debian package bubblewrap\)"):
        backend.launch(task("echo hello"))
    ref = backend.launch(task("echo hello", owner_is_admin=True))  # an admin's own task runs
    assert wait_until_ended(backend, ref) == TaskPhase.SUCCEEDED
    assert b"[portal] this task runs unsandboxed" in backend.read_log(ref, "stderr")  # says so


@pytest.mark.django_db(transaction=True)
def test_without_bwrap_the_job_of_an_ordinary_user_fails_with_the_reason(alice, admin, settings):
    settings.LOCAL_SANDBOX_BWRAP = "/nonexistent/bwrap"
    backend = registry.get_backend()
    job = settle(backend, lifecycle.submit(alice, hello_job("unsandboxed")))
    task_row = Task.objects.get(attempt__job=job)
    assert job.state == JobState.FAILED
    assert "is not installed on this machine" in task_row.diagnostics
    admins = settle(backend, lifecycle.submit(admin, hello_job("admins")))
    assert admins.state == JobState.SUCCEEDED


REPO = Path(__file__).resolve().parents[2]


@contextmanager
def run_as_ordinary_user(script: str) -> Iterator[tuple[Path, subprocess.CompletedProcess[str]]]:
    """``script`` (Python, given a directory of its own as its argument) run to its end as uid
    65534, and that directory (holding ``var/secret_key``, all owned by 65534), removed after
    the block."""
    top = Path(tempfile.mkdtemp(prefix="ordinary-", dir="/var/tmp"))  # noqa: S108
    try:
        (top / "var").mkdir()
        (top / "var" / "secret_key").write_text("s3cret")
        for path in (top, top / "var", top / "var" / "secret_key"):
            os.chown(path, 65534, 65534)
        (top / "run.py").write_text(script)
        done = subprocess.run(  # noqa: S603
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
            + [sys.executable, str(top / "run.py"), str(top)],
            cwd=REPO,
            env={"PATH": os.environ["PATH"], "HOME": str(top), "PYTHONPATH": str(REPO)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        yield top, done
    finally:
        shutil.rmtree(top)


AS_ORDINARY_USER = """\
import sys, time
from pathlib import Path
from backends.base import Placement, TaskLaunch
from backends.local import LocalBackend, LocalBackendError
from backends.local.sandbox import SandboxConfig

top = Path(sys.argv[1])
launch = TaskLaunch("job-1-a0", "worker", 0, 0, "true", {}, Placement("127.0.0.1", {}), 1, 100, 0)
try:  # no cgroup without root: another user's task is refused by default
    LocalBackend(top / "tasks", sandbox_config=SandboxConfig()).launch(launch)
except LocalBackendError as error:
    print("refused:", "cannot limit the memory, cpu, pids" in str(error))
config = SandboxConfig(hidden=(str(top / "var"),), require_limits=False)
backend = LocalBackend(top / "tasks", sandbox_config=config)
script = (
    "id -u; ls /proc | grep -c '^[0-9]'; cat %s/var/secret_key || echo hidden-var\\n"
    "python3 -c 'b = bytearray(1024 ** 3)' 2>/dev/null || echo no-gibibyte-for-memoryMB-100\\n"
) % top
launch = TaskLaunch("job-1-a1", "worker", 0, 0, script, {}, Placement("127.0.0.1", {}), 1, 100, 0)
ref = backend.launch(launch)
while backend.observe([ref])[ref].phase.value not in ("succeeded", "failed"):
    time.sleep(0.05)
print(backend.read_log(ref, "stdout").decode(), end="")
"""


@pytest.mark.skipif(
    os.geteuid() != 0, reason="becomes another user (as an ordinary user, every test is this one)"
)
def test_a_portal_run_by_an_ordinary_user_still_sandboxes_its_tasks():
    """Without root no cgroup can be used: another user's task is refused unless an admin
    allows it (LOCAL_REQUIRE_LIMITS=false); then it runs as the portal's user, in the sandbox all
    the same (its own pid namespace, var/ hidden), its memory bounded by RLIMIT_AS."""
    with run_as_ordinary_user(AS_ORDINARY_USER) as (_, done):
        assert done.returncode == 0, done.stderr
        refused, uid, procs, *rest = done.stdout.splitlines()
        assert refused == "refused: True"
        assert uid == "65534"
        assert int(procs) < 6
        assert rest == ["hidden-var", "no-gibibyte-for-memoryMB-100"]


TERMINAL_AS_ORDINARY_USER = """\
import sys, time
from pathlib import Path
from backends.base import Placement, TaskLaunch
from backends.local import LocalBackend, LocalBackendError
from backends.local.sandbox import SandboxConfig

top = Path(sys.argv[1])
config = SandboxConfig(hidden=(str(top / "var"),), require_limits=False)
backend = LocalBackend(top / "tasks", sandbox_config=config)
launch = TaskLaunch("job-1-a1", "worker", 0, 0, "sleep 30", {}, Placement("127.0.0.1", {}), 1, 0, 0)
ref = backend.launch(launch)
session = backend.shell(ref)  # at once: the terminal waits for the sandbox to be ready
session.write(
    b"echo uid=$(id -u) pwd=$(pwd) procs=$(ls /proc | grep -c '^[0-9]');"
    b" cat %s/var/secret_key || echo hidden-var; grep -E '^Cap(Eff|Prm)' /proc/self/status;"
    b" echo end-$((6*7))\\n" % str(top).encode()
)
seen = b""
while b"end-42\\r" not in seen and b"end-42\\n" not in seen:
    chunk = session.read(10)
    if not chunk:
        break
    seen += chunk
session.close()
backend.stop([ref])
while backend.observe([ref])[ref].phase.value not in ("succeeded", "failed"):
    time.sleep(0.05)  # its wrapper done with its files before the test removes them
print(seen.decode(errors="replace"))
"""


@pytest.mark.skipif(
    os.geteuid() != 0, reason="becomes another user (as an ordinary user, every test is this one)"
)
def test_the_terminal_of_a_portal_run_by_an_ordinary_user_lands_in_the_sandbox():
    """Without root, the terminal joins the task's sandbox with ``nsenter --user`` (the
    portal's user owns the namespace): the task's uid, its pid namespace, var/ hidden, and no
    capability in the namespace it joined."""
    with run_as_ordinary_user(TERMINAL_AS_ORDINARY_USER) as (top, done):
        assert done.returncode == 0, done.stderr
        text = done.stdout.split("end-$((6*7))")[-1]
        assert "end-42" in text, done.stdout
        assert f"uid=65534 pwd={top}/tasks/job-1-a1/worker-0/work procs=" in text, text
        assert int(text.split("procs=")[1].split()[0]) < 10
        assert "hidden-var" in text
        assert "s3cret" not in text
        assert "CapPrm:\t0000000000000000" in text, text
        assert "CapEff:\t0000000000000000" in text


def test_a_task_root_below_a_private_directory_works_and_its_neighbours_are_covered():
    """The task's uid may not pass through the portal's private directories: where they lie
    above its work directory they are covered by an empty tmpfs, their files out of view."""
    top = Path(tempfile.mkdtemp(prefix="private-", dir="/var/tmp"))  # noqa: S108 - mode 0700
    try:
        (top / "neighbour.txt").write_text("the portal's")
        (top / "neighbour.txt").chmod(0o644)
        backend = LocalBackend(top / "tasks")
        ref = backend.launch(task(f"ls -A {top}; cat {top}/neighbour.txt || echo covered"))
        assert wait_until_ended(backend, ref) == TaskPhase.SUCCEEDED
        assert backend.read_log(ref, "stdout") == b"tasks\ncovered\n"
        backend.cleanup([])
    finally:
        disk.release_all(top)  # the task root's mount of itself
        shutil.rmtree(top)


def test_a_directory_hidden_under_another_hidden_one_needs_no_tmpfs_of_its_own():
    """The portal's tree, its var/ and the tasks' root in it: one tmpfs over the tree hides
    all three (a tmpfs more is a mount and a remount, each of which has bwrap read the whole
    mount table)."""
    top = Path(tempfile.mkdtemp(prefix="portal-", dir="/var/tmp"))  # noqa: S108 - mode 0700
    try:
        (top / "var" / "tasks").mkdir(parents=True)
        other = top.parent / f"{top.name}-other"
        other.mkdir()
        hidden = [str(top / "var" / "tasks"), str(top), str(other), str(top / "var")]
        assert covered(hidden, []) == [str(top), str(other)]
    finally:
        shutil.rmtree(top)
        shutil.rmtree(other)


def test_a_stop_right_after_the_launch_ends_the_task_by_its_sigterm(tmp_path: Path):
    """Stop as soon as the sandbox's init is there, before it has started the bootstrap (the
    kernel drops a SIGTERM to a pid namespace's init): the stop is not lost, the task ends with
    143, not with the SIGKILL at the end of the grace period."""
    backend = LocalBackend(tmp_path / "tasks", stop_grace_seconds=30)
    for index in range(5):
        ref = backend.launch(task("sleep 60", index=index))
        pid = record_pid(backend, ref)
        wait_for(lambda c=backend.root / ref, p=pid: sandbox_init(c, p), step=0.001)
        backend.stop([ref])
        assert wait_until_ended(backend, ref, timeout=60) == TaskPhase.FAILED
        observation = backend.observe([ref])[ref]
        assert observation.exit_code == 143, observation.diagnostics
        assert observation.diagnostics.endswith("after a stop request")
