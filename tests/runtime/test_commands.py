"""A role's commands are one bash script (``user.sh``) run in a process of its own, without
errexit, as OpenPAI runs them: its status, its last command's, is the task's exit code."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from contextlib import suppress
from pathlib import Path

import pytest

from backends.base import Placement
from clusters import registry
from jobs import lifecycle
from jobs.models import Job, Task
from jobs.runtime import JobContext, bootstrap_script, task_environment
from jobs.states import JobState, TaskState
from tests.jobs.helpers import reconcile_until, settle
from tests.jobs.samples import v1_job
from tests.runtime.jobs import one_role
from tests.support.processes import processes_running
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def run(alice, backend, name: str, commands: list[str], extra: str = "") -> tuple[Job, Task]:
    job = settle(backend, lifecycle.submit(alice, one_role(name, commands, extra)))
    return job, Task.objects.get(attempt__job=job)


def log(backend, task: Task, stream: str = "stdout") -> str:
    return backend.read_log(task.backend_ref, stream).decode()


def test_a_last_command_failing_inside_an_and_list_fails_the_job(alice, backend):
    job, task = run(alice, backend, "and_list", ["echo first", "cd /nonexistent && echo never"])
    assert job.state == JobState.FAILED
    assert task.exit_code == 1
    assert job.exit_code == 1
    assert log(backend, task).splitlines() == ["first"]
    assert "/nonexistent: No such file or directory" in log(backend, task, "stderr")


def test_a_failing_middle_command_does_not_end_the_job(alice, backend):
    job, task = run(alice, backend, "middle", ["false", "echo continued"])
    assert job.state == JobState.SUCCEEDED
    assert task.exit_code == 0
    assert "continued" in log(backend, task)


def test_set_e_written_by_the_user_ends_the_script_at_the_first_failure(alice, backend):
    job, task = run(alice, backend, "errexit", ["set -e", "false", "echo never"])
    assert job.state == JobState.FAILED
    assert task.exit_code == 1
    assert "never" not in log(backend, task)
    assert "[portal] the commands failed with exit code 1" in log(backend, task, "stderr")


def test_bash_features_work(alice, backend):
    commands = [
        "[[ abc == a* ]] && echo brackets",
        "names=(ps worker chief)",
        'echo "array ${names[1]} ${#names[@]}"',
        "echo 'export FROM_LIB=yes' > lib.sh",
        "source ./lib.sh",
        "echo sourced $FROM_LIB",
        'echo "shell $BASH_VERSION" | cut -c1-10',
    ]
    job, task = run(alice, backend, "bashisms", commands)
    assert job.state == JobState.SUCCEEDED
    out = log(backend, task).splitlines()
    assert out[:3] == ["brackets", "array worker 3", "sourced yes"]
    assert out[3].startswith("shell ") and len(out[3]) > len("shell ")
    assert "no bash" not in log(backend, task, "stderr")


def test_a_v1_command_prints_the_status_of_the_command_before_it(alice, backend):
    text = json.dumps(v1_job("v1_status", "ls /nonexistent; echo exit=$?"))
    job = settle(backend, lifecycle.submit(alice, text))
    task = Task.objects.get(attempt__job=job)
    assert job.state == JobState.SUCCEEDED
    assert "exit=2" in log(backend, task)


def test_the_script_is_user_sh_in_the_work_dir_readable_by_its_owner_only(alice, backend):
    """Written as the user wrote it, quotes, ``$``, backslashes and ``%`` included."""
    commands = ["printf '%s\\n' \"it's\" '$HOME \\n %s'", 'echo "PORTAL_USER_SH" 100%']
    job, task = run(alice, backend, "user_sh", commands)
    assert job.state == JobState.SUCCEEDED
    assert log(backend, task).splitlines() == ["it's", "$HOME \\n %s", "PORTAL_USER_SH 100%"]
    script = backend.work_dir(task.backend_ref) / "user.sh"
    assert script.read_text() == "\n".join(commands) + "\n"
    assert script.stat().st_mode & 0o777 == 0o600


def test_without_bash_the_commands_run_under_sh_and_the_log_says_so(alice, settings, shared: Path):
    """A PATH with the tools the bootstrap needs but no bash: nothing fakes the outcome."""
    tools = shared / "bin"
    tools.mkdir()
    for name in ("sh", "setsid", "cat", "chmod", "rm", "mv", "mkdir", "sleep", "env", "date"):
        found = shutil.which(name)
        assert found is not None, name
        (tools / name).symlink_to(found)
    assert shutil.which("bash", path=str(tools)) is None
    settings.LOCAL_TASK_PATH = str(tools)  # the tasks' PATH
    registry.get_backend.cache_clear()
    backend = registry.get_backend()
    commands = ["[[ 1 == 1 ]] && echo bash || echo 'no [[ here'", "echo done"]
    job, task = run(alice, backend, "no_bash", commands)
    assert job.state == JobState.SUCCEEDED
    assert log(backend, task).splitlines() == ["no [[ here", "done"]
    stderr = log(backend, task, "stderr")
    assert f"[portal] no bash on PATH ({tools}): the commands run under /bin/sh" in stderr


def test_stop_reaches_the_user_script_and_the_exit_steps_still_run(alice, backend, shared):
    pidfile = shared / "pid"
    deployment = """\
        deployments:
          - name: dep
            taskRoles:
              taskrole_1:
                postCommands: ["echo post ran"]
        defaults: {deployment: dep}
        """
    text = one_role("stop_user", [f"echo $$ > {pidfile}", "sleep 313"], deployment)
    job = lifecycle.submit(alice, text)
    reconcile_until(
        backend, lambda: Task.objects.filter(attempt__job=job, state=TaskState.RUNNING).exists()
    )
    wait_for(lambda: pidfile.exists() and processes_running(["sleep", "313"]))
    assert lifecycle.stop(Job.objects.get(id=job.id), alice)
    job = settle(backend, job)
    task = Task.objects.get(attempt__job=job)
    assert job.state == JobState.STOPPED
    assert task.exit_code == 143
    assert "post ran" in log(backend, task)
    assert not processes_running(["sleep", "313"])


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_sigterm_to_the_bootstrap_alone_is_passed_on_to_the_user_script(tmp_path: Path):
    """As on Kubernetes, where only the container's first process (the bootstrap) is signalled."""
    role = {
        "instances": 1,
        "completion": {"minFailedInstances": 1, "minSucceededInstances": -1},
        "resourcePerInstance": {"cpu": 1, "memoryMB": 128, "gpu": 0},
        "commands": ["echo $$ > user.pid", "sleep 300"],
    }
    deployment = {"name": "dep", "taskRoles": {"worker": {"postCommands": ["echo post ran"]}}}
    protocol = {"name": "j", "taskRoles": {"worker": role}, "deployments": [deployment]}
    ctx = JobContext("alice", "j", "default", protocol, deployment="dep")
    env = task_environment(ctx, {("worker", 0): Placement("127.0.0.1", {})}, "worker", 0)
    (tmp_path / "bootstrap.sh").write_text(bootstrap_script(ctx, "worker", env))
    with (tmp_path / "stdout.log").open("w") as out:
        bootstrap = subprocess.Popen(
            ["/bin/sh", "bootstrap.sh"],
            cwd=tmp_path,
            env={"PATH": os.environ["PATH"], "PAI_WORK_DIR": str(tmp_path)},
            stdout=out,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a process group of its own, as in a container
        )
    try:
        pidfile = tmp_path / "user.pid"
        user_pid = int(wait_for(lambda: pidfile.exists() and pidfile.read_text().strip()))
        sleep_pid = int(wait_for(lambda: _child_of(user_pid)))
        bootstrap.send_signal(signal.SIGTERM)
        assert bootstrap.wait(timeout=30) == 143
        assert not _running(user_pid)
        wait_for(lambda: not _running(sleep_pid))  # what the script started got TERM too
    finally:
        with suppress(ProcessLookupError):
            os.killpg(bootstrap.pid, signal.SIGKILL)
    assert "post ran" in (tmp_path / "stdout.log").read_text()


def test_a_user_sh_left_in_the_work_dir_is_replaced_never_written_through(tmp_path: Path):
    """A retry in the same directory (Slurm's shared one) finds the last user.sh, maybe made
    a link by the job: the bootstrap removes it and writes a new file of its owner's only."""
    role = {
        "instances": 1,
        "completion": {"minFailedInstances": 1, "minSucceededInstances": -1},
        "resourcePerInstance": {"cpu": 1, "memoryMB": 128, "gpu": 0},
        "commands": ["echo ran"],
    }
    ctx = JobContext("alice", "j", "default", {"name": "j", "taskRoles": {"worker": role}})
    env = task_environment(ctx, {("worker", 0): Placement("127.0.0.1", {})}, "worker", 0)
    (tmp_path / "bootstrap.sh").write_text(bootstrap_script(ctx, "worker", env))
    outside = tmp_path / "outside.txt"  # not there: the link dangles
    (tmp_path / "user.sh").symlink_to(outside)
    for _ in range(2):  # a link, then the file the first run wrote
        run = subprocess.run(
            ["/bin/sh", "bootstrap.sh"],
            cwd=tmp_path,
            env={"PATH": os.environ["PATH"], "PAI_WORK_DIR": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 0, run.stderr
        assert run.stdout == "ran\n"
    script = tmp_path / "user.sh"
    assert not script.is_symlink()
    assert script.read_text() == "echo ran\n"
    assert script.stat().st_mode & 0o777 == 0o600
    assert not outside.exists()


def _child_of(pid: int) -> int | None:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return int(children[0]) if children else None
