"""What it takes to SSH into a job's tasks: per task its IP and ``ssh`` port, the job key's
fingerprint (OpenSSH's ``SHA256:...``) and the ``ssh`` command line to paste.

The ssh plugin's sshd (``jobs.runtime.ssh.SSHD``) listens on the task's ``ssh`` port and lets
in the task's own user: the portal's user on the local backend, the image's (root) in a pod."""

from __future__ import annotations

import base64
import binascii
import getpass
import hashlib
from collections.abc import Iterable
from typing import Any

from django.conf import settings

from jobs.models import Job, Task


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


def ssh_user() -> str:
    """Who a task's sshd lets in: tasks of the local backend run as the portal's own user."""
    return getpass.getuser() if settings.CLUSTER_BACKEND == "local" else "root"


def ssh_command(key: str, ip: str, port: int | None) -> str | None:
    if not ip or port is None:
        return None
    return f"ssh -i {key} -p {port} {ssh_user()}@{ip}"


def task_ssh(task: Task, key: str) -> dict[str, Any]:
    ip = task.ip or task.address
    port = ssh_port(task)
    return {
        "taskRole": task.role,
        "taskIndex": task.index,
        "taskState": task.state,
        "containerIp": ip or None,
        "containerSshPort": port,
        "sshCommand": ssh_command(key, ip, port),
    }


def ssh_info(job: Job, tasks: Iterable[Task]) -> dict[str, Any]:
    """Per task its IP, SSH port (the ``ssh`` port label, else None) and command, with the
    fingerprint of the job's key (None while the job has no key)."""
    key = key_file_name(job)
    return {
        "keyPairName": key,
        "keyFingerprint": fingerprint(job.ssh_public_key or ""),
        "publicKey": job.ssh_public_key or None,
        "tasks": [task_ssh(t, key) for t in sorted(tasks, key=lambda t: (t.role, t.index))],
    }
