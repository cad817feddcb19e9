"""The ssh plugin starts the image's sshd in each task: ``ssh <role>-<index>`` works between
the tasks of a job, and the sessions get the task's environment."""

from __future__ import annotations

import getpass
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from backends.base import Placement
from jobs import lifecycle
from jobs.models import Task
from jobs.plugins.ssh.script import SSHD
from jobs.runtime import JobContext, bootstrap_script, task_environment
from jobs.sshinfo import ssh_info, ssh_user
from jobs.states import JobState
from tests.jobs.helpers import reconcile_until, settle
from tests.runtime.jobs import one_role

SSHD_BINARY = Path("/usr/sbin/sshd")

SSH_PLUGIN = """\
extras:
  com.microsoft.pai.runtimeplugin:
    - plugin: ssh
      parameters: {jobssh: true}
"""

# Runs until someone touches ``done`` in the task's directory (through ssh), at most 30s.
WAIT_FOR_DONE = (
    'n=0; while [ ! -f "$PAI_WORK_DIR/done" ] && [ "$n" -lt 120 ];'
    " do sleep 0.25; n=$((n + 1)); done"
)

# Task 0 asks task 1 (retrying until its sshd answers) to echo its own index, then tells it to
# stop waiting; task 1 waits for that.
COMMAND = (
    'if [ "$PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX" = 0 ]; then'
    " n=0;"
    " until ssh -o BatchMode=yes -o ConnectTimeout=5 worker-1"
    " 'echo from-$PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX'; do"
    ' n=$((n + 1)); [ "$n" -lt 40 ] || exit 1; sleep 0.25; done;'
    " ssh -o BatchMode=yes worker-1 'touch \"$PAI_WORK_DIR/done\"';"
    f" else {WAIT_FOR_DONE}; fi"
)


def two_tasks(name: str) -> str:
    return one_role(name, [COMMAND], SSH_PLUGIN, role="worker", instances=2)


def need_sshd() -> None:
    """Skip without sshd on a developer's machine; in CI it must be there (``make sshd``)."""
    if SSHD_BINARY.exists():
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{SSHD_BINARY} is missing in CI: `make sshd` installs openssh-server")
    pytest.skip(f"{SSHD_BINARY} is missing (`make sshd` installs openssh-server)")


def logs(backend, task: Task) -> str:
    return "".join(backend.read_log(task.backend_ref, s).decode() for s in ("stdout", "stderr"))


@pytest.mark.django_db(transaction=True)
def test_ssh_between_the_tasks_of_a_job(alice, backend):
    need_sshd()
    job = settle(backend, lifecycle.submit(alice, two_tasks("ssh_between")), timeout=60)
    first, second = Task.objects.filter(attempt__job=job).order_by("index")
    report = f"task 0:\n{logs(backend, first)}\ntask 1:\n{logs(backend, second)}"
    assert "from-1" in backend.read_log(first.backend_ref, "stdout").decode(), report
    assert job.state == JobState.SUCCEEDED, report
    port = second.ports["ssh"][0]
    started = re.search(rf"\[portal\] ssh: sshd \(pid (\d+)\) listens on port {port}\b", report)
    assert started, report
    assert not sshd_runs(int(started.group(1)))  # it ended with its task


@pytest.mark.django_db(transaction=True)
def test_the_ssh_command_the_portal_shows_works(alice, backend, tmp_path: Path):
    need_sshd()
    job = lifecycle.submit(alice, one_role("ssh_from_outside", [WAIT_FOR_DONE], SSH_PLUGIN))
    reconcile_until(backend, lambda: Task.objects.filter(state="RUNNING").exists())
    job.refresh_from_db()
    info = ssh_info(job, Task.objects.filter(attempt__job=job))
    command = info["tasks"][0]["sshCommand"]
    assert command.endswith(f"{ssh_user(alice.id)}@127.0.0.1")
    key = tmp_path / info["keyPairName"]
    key.write_text(job.ssh_private_key)
    key.chmod(0o600)
    argv = command.replace(f"-i {info['keyPairName']}", f"-i {key}").split()
    options = ["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no"]
    options += ["-o", "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=5"]
    remote = 'touch "$PAI_WORK_DIR/done" && echo "in $PAI_CURRENT_TASK_ROLE_NAME"'
    deadline = time.monotonic() + 20
    while True:  # until the task's sshd listens
        done = subprocess.run([*argv[:1], *options, *argv[1:], remote], capture_output=True)
        if done.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    assert done.stdout.decode().strip() == "in taskrole_1", done.stderr.decode()
    assert settle(backend, job).state == JobState.SUCCEEDED


def test_the_ssh_user_is_the_tasks_own_on_the_local_backend(settings):
    """As root, user 7's tasks run as uid LOCAL_TASK_UID_BASE + 7, named so in their
    sandboxes; else as the portal's own user."""
    settings.CLUSTER_BACKEND = "local"
    own = f"u{settings.LOCAL_TASK_UID_BASE + 7}" if os.geteuid() == 0 else getpass.getuser()
    assert ssh_user(7) == own
    settings.CLUSTER_BACKEND = "kubernetes"
    assert ssh_user() == "root"


def sshd_runs(pid: int) -> bool:
    try:
        return b"sshd" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


@pytest.mark.django_db(transaction=True)
def test_the_ssh_plugin_gives_a_role_without_an_ssh_port_one_as_openpai_does(alice, backend):
    text = one_role("no_ssh_port", ["echo done"], SSH_PLUGIN).replace("ssh: 1", "http: 1")
    job = settle(backend, lifecycle.submit(alice, text))
    assert job.state == JobState.SUCCEEDED
    task = Task.objects.get(attempt__job=job)
    assert list(task.ports) == ["http", "ssh"]
    if SSHD_BINARY.exists():
        port = task.ports["ssh"][0]
        assert f"listens on port {port}" in logs(backend, task)


# -- the script itself -------------------------------------------------------------------------


def script_of(extras: dict) -> str:
    role = {
        "instances": 2,
        "completion": {"minFailedInstances": 1, "minSucceededInstances": 2},
        "resourcePerInstance": {"cpu": 1, "memoryMB": 128, "gpu": 0, "ports": {"ssh": 1}},
        "commands": ["echo hi"],
    }
    protocol = {"name": "j", "taskRoles": {"worker": role}, "extras": extras}
    ctx = JobContext(
        "alice", "j", "default", protocol, ssh_private_key="key", ssh_public_key="ssh-ed25519 A"
    )
    placements = {("worker", i): Placement("10.0.0.1", {"ssh": [2000 + i]}) for i in (0, 1)}
    return bootstrap_script(ctx, "worker", task_environment(ctx, placements, "worker", 0))


def plugin(parameters: dict) -> dict:
    return {"com.microsoft.pai.runtimeplugin": [{"plugin": "ssh", "parameters": parameters}]}


@pytest.mark.parametrize(
    "parameters",
    [{"jobssh": True}, {"userssh": {"type": "custom", "value": "ssh-ed25519 AAAA me@laptop"}}],
)
def test_the_script_starts_sshd_when_the_ssh_plugin_is_on(parameters):
    script = script_of(plugin(parameters))
    assert '-D -f "$portal_ssh/sshd_config" -E "$portal_ssh/sshd.log"' in script
    assert "\nportal_sshd\n" in script
    assert 'kill "$portal_sshd_pid"' in script  # the exit trap stops it


@pytest.mark.parametrize("extras", [{}, plugin({"jobssh": False})])
def test_the_script_has_no_sshd_without_the_ssh_plugin(extras):
    assert "sshd" not in script_of(extras)


def sh(script: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        ["/bin/sh", "-c", script], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


FUNCTIONS = SSHD.rsplit("portal_sshd\n", 1)[0] + 'portal_say() { echo "[portal] $*" >&2; }\n'


def test_the_task_environment_is_quoted_for_sshd_config():
    tricky = 'a "quoted" back\\slash $HOME %u'
    out = sh(
        FUNCTIONS + 'portal_sshd_env; printf "%s" "$portal_setenv"',
        {"PATH": os.environ["PATH"], "TRICKY": tricky, "MULTI": "one\ntwo", "HOME": "/h"},
    )
    assert ' "TRICKY=a \\"quoted\\" back\\\\slash $HOME %u"' in out
    assert "MULTI" not in out and "HOME=" not in out  # sshd sets HOME itself
    assert f' "PATH={os.environ["PATH"]}"' in out


FAKE_SSHD = """#!/bin/sh
# -t fails on SetEnv, like an sshd older than 7.8; -D writes the pid file and waits.
config=$3
if [ "$1" = -t ]; then
  if grep -q '^SetEnv' "$config"; then echo "Bad configuration option: SetEnv" >&2; exit 255; fi
  exit 0
fi
sed -n 's/^PidFile "\\(.*\\)"$/\\1/p' "$config" | { read -r pidfile; echo $$ > "$pidfile"; }
exec sleep 30
"""


def test_an_sshd_without_set_env_still_starts_without_it(tmp_path: Path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sshd").write_text(FAKE_SSHD)
    (bin_dir / "sshd").chmod(0o755)
    ssh_dir = tmp_path / ".ssh"
    ssh_dir.mkdir()
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "PAI_CONTAINER_SSH_PORT": "2222",
        "PAI_CONTAINER_HOST_IP": "10.0.0.1",
        "portal_ssh": str(ssh_dir),
        "portal_task": "worker-0",
    }
    done = subprocess.run(
        ["/bin/sh", "-c", FUNCTIONS + 'portal_sshd; kill "$portal_sshd_pid"'],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "ssh: this sshd takes no SetEnv" in done.stderr
    assert "listens on port 2222" in done.stderr
    config = (ssh_dir / "sshd_config").read_text()
    assert "SetEnv" not in config and "ListenAddress" not in config  # every address
    assert "Port 2222\n" in config and "PasswordAuthentication no\n" in config
