"""What it takes to SSH into a job's tasks: per task its IP and ``ssh`` port, the job key's
fingerprint (OpenSSH's ``SHA256:...``) and the ``ssh`` command line to paste.

The ssh plugin's sshd (``jobs.plugins.ssh.script.SSHD``) listens on the task's ``ssh`` port and lets
in the task's own user: the portal's user on the local backend, the image's (root) in a pod.
Whether it started is what the task's bootstrap said in its log (``sshd_state``): a command is
shown only for a task whose sshd listens, else why nobody can ssh in and how to get sshd."""

from __future__ import annotations

import base64
import binascii
import getpass
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from backends.base import Backend
from backends.local.sandbox import task_user_name
from clusters.registry import get_backend, local_sandbox, tasks_use_host_programs
from jobs import plugins
from jobs.models import Job, Task

# What the bootstrap's ssh step writes to stderr (``jobs.plugins.ssh.script``), near the start.
SSHD_LISTENS = re.compile(rb"^\[portal\] ssh: sshd \(pid \d+\) listens on port \d+", re.M)
SSHD_NOT_STARTED = re.compile(
    rb"^\[portal\] ssh: (no sshd in the image|sshd not started: [^\n]*|sshd did not start)", re.M
)
LOG_HEAD_BYTES = 64 * 1024
PLUGIN_AND_PORT = (
    "with the ssh plugin on (jobSSH) and an ssh port in the task role's ports (ssh: 1)"
)
HOW_TO_GET_SSHD = (
    "to ssh into a task, run it in an image with sshd (the openssh-server package), "
    + PLUGIN_AND_PORT
)
# The local backend without images runs tasks on the host's own programs (issue 28: the panel
# said "an image with sshd" where no image is used).
HOW_TO_GET_SSHD_ON_HOST = (
    "to ssh into a task, the machine the portal runs its tasks on needs sshd (an admin installs "
    "the openssh-server package there: tasks use that machine's programs, not their "
    f"dockerImage, on this portal), {PLUGIN_AND_PORT}"
)
NO_SSHD_IN_IMAGE = "no sshd in the image"
NO_SSHD_ON_HOST = "no sshd on the machine the task runs on"


def how_to_get_sshd(backend: Backend) -> str:
    return HOW_TO_GET_SSHD_ON_HOST if tasks_use_host_programs(backend) else HOW_TO_GET_SSHD


@dataclass(frozen=True)
class SshdState:
    """``listening``, ``not started`` (``why`` says why), ``starting`` (not said yet) or
    ``not running`` (the task is not)."""

    status: str
    why: str = ""


STARTING = SshdState("starting", "the task has not started its sshd yet")


def key_file_name(job: Job) -> str:
    """The name the job's private key downloads under (jobs.views.sshkey)."""
    return f"{job.name}.id_ed25519"


def fingerprint(public_key: str) -> str | None:
    """``SHA256:<base64 without padding>`` of an OpenSSH public key line, as ``ssh-keygen -l``
    prints it; None when there is no key or it is not one."""
    parts = public_key.split()
    if len(parts) < 2:
        return None
    try:
        blob = base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError):
        return None
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return f"SHA256:{digest}"


def ssh_port(task: Task) -> int | None:
    ports = (task.ports or {}).get("ssh") or []
    if isinstance(ports, int):
        return ports
    return int(ports[0]) if ports else None


def ssh_user(owner_id: int | None = None) -> str:
    """Who a task's sshd lets in: on the local backend, the user the owner's tasks run as (their
    own uid's name when the portal runs as root, else the portal's own user); root in a pod."""
    if settings.CLUSTER_BACKEND != "local":
        return "root"
    return task_user_name(local_sandbox(), owner_id) or getpass.getuser()


def ssh_command(key: str, ip: str, port: int | None, user: str) -> str | None:
    if not ip or port is None:
        return None
    return f"ssh -i {key} -p {port} {user}@{ip}"


def task_ssh(
    task: Task, key: str, sshd: SshdState | None = None, user: str = "root"
) -> dict[str, Any]:
    ip = task.ip or task.address
    port = ssh_port(task)
    command = ssh_command(key, ip, port, user)
    row = {
        "taskRole": task.role,
        "taskIndex": task.index,
        "taskState": task.state,
        "containerIp": ip or None,
        "containerSshPort": port,
        "sshCommand": command,
    }
    if sshd is not None:
        listening = sshd.status == "listening"
        row["sshCommand"] = command if listening else None
        row["sshd"] = sshd.status
        row["sshdNote"] = "" if listening else sshd.why
    return row


def ssh_info(
    job: Job, tasks: Iterable[Task], states: Mapping[int, SshdState] | None = None
) -> dict[str, Any]:
    """Per task its IP, SSH port (the ``ssh`` port label, else None) and command, with the
    fingerprint of the job's key (None while the job has no key). With ``states`` (from
    ``sshd_states``) a task gets its sshd's state, and a command only while its sshd listens."""
    key = key_file_name(job)
    user = ssh_user(job.owner_id)
    info = {
        "keyPairName": key,
        "keyFingerprint": fingerprint(job.ssh_public_key or ""),
        "publicKey": job.ssh_public_key or None,
        "tasks": [
            task_ssh(t, key, None if states is None else states.get(t.id, NOT_RUNNING), user)
            for t in sorted(tasks, key=lambda t: (t.role, t.index))
        ],
    }
    if states is not None:
        info["howToGetSshd"] = how_to_get_sshd(get_backend())
    return info


NOT_RUNNING = SshdState("not running", "the task is not running")


def sshd_states(job: Job, tasks: Iterable[Task], backend: Backend) -> dict[int, SshdState]:
    """The sshd of each running task, by task id: without the ssh plugin none is started;
    else what the task's bootstrap said in its log. At most ``MAX_LOG_READS`` logs are read
    per call (on Kubernetes each is an API call); the tasks left over stay ``starting`` until
    a later call, as the answers already read are kept."""
    jobssh, user_key = plugins.ssh_options(job.protocol)
    off = SshdState("not started", "the job's ssh plugin is off (no jobSSH, no user key)")
    states = {}
    reads = 0
    for task in sorted(tasks, key=lambda t: (t.role, t.index)):
        if task.state != "RUNNING":
            continue
        if not (jobssh or user_key):
            states[task.id] = off
        elif ssh_port(task) is None:
            states[task.id] = SshdState("not started", "the task role has no ssh port")
        elif (backend.name, task.backend_ref) in _known or reads < MAX_LOG_READS:
            reads += (backend.name, task.backend_ref) not in _known
            states[task.id] = sshd_state(backend, task.backend_ref)
        else:
            states[task.id] = STARTING
    if tasks_use_host_programs(backend):  # the bootstrap cannot tell a host from an image
        on_host = SshdState("not started", NO_SSHD_ON_HOST)
        states = {k: on_host if v.why == NO_SSHD_IN_IMAGE else v for k, v in states.items()}
    return states


MAX_LOG_READS = 16


def sshd_state(backend: Backend, ref: str) -> SshdState:
    """What the task's bootstrap said of its sshd. A final answer is kept (per process, for
    the last ``KNOWN_MAX`` tasks): a task's log never unsays it, and the live page asks often."""
    key = (backend.name, ref)
    state = _known.get(key) or _said(backend, ref)
    if state is not STARTING:
        if len(_known) >= KNOWN_MAX:
            _known.pop(next(iter(_known)))
        _known[key] = state
    return state


KNOWN_MAX = 4096
_known: dict[tuple[str, str], SshdState] = {}


def _said(backend: Backend, ref: str) -> SshdState:
    if not ref:
        return STARTING
    head = b""
    for stream in ("stderr", "stdout"):  # Kubernetes has both in stdout
        try:
            data = backend.read_log_head(ref, stream, LOG_HEAD_BYTES)
        except Exception:  # a log that cannot be read says nothing (yet)
            data = b""
        head += data + b"\n"
    if SSHD_LISTENS.search(head):
        return SshdState("listening")
    found = SSHD_NOT_STARTED.search(head)
    if found:
        return SshdState("not started", found.group(1).decode("utf-8", "replace"))
    return STARTING
