"""What the job page shows of each task beyond its row: port links and the SSH panel."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clusters.registry import get_backend
from jobs.models import Job, Task
from jobs.sshinfo import SshdState, ssh_info, ssh_user, sshd_states

WEB_LABELS = ("jupyter", "tensorboard", "http", "https", "web", "ui", "notebook", "vscode")


def port_links(task: Task) -> list[tuple[str, int, str]]:
    """``(label, port, url)`` for every port; url is "" unless the label is a web one."""
    host = task.ip or task.address
    links = []
    for label, ports in (task.ports or {}).items():
        web = host and any(label.lower().startswith(w) for w in WEB_LABELS)
        scheme = "https" if label.lower().startswith("https") else "http"
        for port in ports if isinstance(ports, list) else [ports]:
            links.append((label, port, f"{scheme}://{host}:{port}/" if web else ""))
    return links


def ssh_panel(
    job: Job, tasks: list[Task], states: Mapping[int, SshdState] | None = None
) -> dict[str, Any] | None:
    """The SSH details of the running tasks that have an ``ssh`` port: the command where the
    task's sshd listens (``states``, read from the tasks' logs when not given), else why nobody
    can ssh in; and a config snippet for the tasks one can ssh into."""
    if not job.ssh_public_key:
        return None
    running = [t for t in tasks if t.state == "RUNNING"]
    if states is None:
        states = sshd_states(job, running, get_backend())
    info = ssh_info(job, running, states)
    rows = [row for row in info["tasks"] if row["containerIp"] and row["containerSshPort"]]
    if not rows:
        return None
    key, user = info["keyPairName"], ssh_user(job.owner_id)
    config = "\n".join(
        f"Host {job.name}-{r['taskRole']}-{r['taskIndex']}\n"
        f"  HostName {r['containerIp']}\n  Port {r['containerSshPort']}\n  User {user}\n"
        f"  IdentityFile ~/.ssh/{key}\n  StrictHostKeyChecking accept-new\n"
        for r in rows
        if r["sshCommand"]
    )
    no_sshd = any(r["sshd"] == "not started" for r in rows)
    return {**info, "tasks": rows, "config": config, "no_sshd": no_sshd}
