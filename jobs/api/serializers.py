"""Jobs in OpenPAI's REST shape (``jobStatus``, ``taskRoles.<role>.taskStatuses``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from jobs.models import Job, JobAttempt, Task


def epoch_ms(moment: datetime | None) -> int | None:
    return int(moment.timestamp() * 1000) if moment else None


SUB_STATES = {
    "WAITING": "AttemptCreationPending",
    "RUNNING": "AttemptRunning",
    "STOPPING": "AttemptDeletionPending",
}


def sub_state(state: str) -> str:
    """OpenPAI's framework-controller ``subState`` for one of our job states."""
    return SUB_STATES.get(state, "Completed")


def task_status(task: Task) -> dict[str, Any]:
    return {
        "taskIndex": task.index,
        "taskState": task.state,
        "containerId": task.backend_ref,
        "containerIp": task.ip,
        "containerPorts": {label: ",".join(map(str, ports)) for label, ports in task.ports.items()},
        "containerNodeName": task.node,
        "containerExitCode": task.exit_code,
        "containerExitDiagnostics": task.diagnostics,
        "containerExitSpec": exit_spec(task),
        "retries": task.retries,
        "createdTime": epoch_ms(task.created_at),
        "launchedTime": epoch_ms(task.started_at),
        "completedTime": epoch_ms(task.completed_at),
    }


def exit_spec(task: Task) -> dict[str, Any] | None:
    """The exit spec's explanation of how the task ended (jobs.exitspec), or None."""
    spec = task.exit_spec or {}
    if not spec:
        return None
    body: dict[str, Any] = {
        "phrase": spec.get("phrase"),
        "type": spec.get("type"),
        "reason": spec.get("reason"),
        # OpenPAI's exit spec: ``code`` an integer (left out when there was none), ``solution``
        # a list of strings.
        "solution": [spec["solution"]] if spec.get("solution") else [],
        "matchedLines": spec.get("lines", []),
    }
    if spec.get("exit_code") is not None:
        body["code"] = spec["exit_code"]
    return body


def app_exit_spec(job: Job, tasks: list[Task]) -> dict[str, Any] | None:
    """The explanation of the task that decided a failed or stopped job (the first to end)."""
    if job.state not in ("FAILED", "STOPPED"):
        return None
    ended = [t for t in tasks if t.exit_spec and t.state in ("FAILED", "STOPPED")]
    failed = [t for t in ended if t.state == "FAILED"] or ended
    if not failed:
        return None
    first = min(failed, key=lambda t: (t.completed_at is None, t.completed_at, t.role, t.index))
    spec = exit_spec(first)
    return {**spec, "taskRole": first.role, "taskIndex": first.index} if spec else None


def job_detail(job: Job, attempt: JobAttempt | None, tasks: list[Task]) -> dict[str, Any]:
    roles: dict[str, Any] = {
        role: {"taskRoleStatus": {"name": role}, "taskStatuses": []}
        for role in job.protocol["taskRoles"]
    }
    for task in sorted(tasks, key=lambda t: (t.role, t.index)):
        roles.setdefault(task.role, {"taskRoleStatus": {"name": task.role}, "taskStatuses": []})
        roles[task.role]["taskStatuses"].append(task_status(task))
    return {
        "name": job.name,
        "jobStatus": {
            "username": job.owner.username,
            "state": job.state,
            "subState": sub_state(job.state),
            "executionType": "STOP" if job.state in ("STOPPING", "STOPPED") else "START",
            "virtualCluster": job.virtual_cluster.name,
            "retries": job.retries,
            "attemptIndex": attempt.number if attempt else None,
            "createdTime": epoch_ms(job.created_at),
            "launchedTime": epoch_ms(job.started_at),
            "completedTime": epoch_ms(job.completed_at),
            "appLaunchedTime": epoch_ms(attempt.created_at) if attempt else None,
            "appCompletedTime": epoch_ms(attempt.completed_at) if attempt else None,
            "appExitCode": job.exit_code,
            "appExitDiagnostics": job.reason,
            "appExitSpec": app_exit_spec(job, tasks),
            "reason": job.reason,
            "waitingReason": job.reason if job.state == "WAITING" else None,
            "queuePosition": job.queue_position if job.state == "WAITING" else None,
            "priority": job.priority,
            "opportunistic": job.opportunistic,
            "preemptible": job.borrowing,
            "totalTaskNumber": job.task_count,
            "totalGpuNumber": job.gpu_count,
            "tags": list(job.tags),
        },
        "taskRoles": roles,
    }
