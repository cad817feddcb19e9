"""Jobs in OpenPAI's REST shape (``jobStatus``, ``taskRoles.<role>.taskStatuses``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from jobs.models import Job, JobAttempt, Task


def epoch_ms(moment: datetime | None) -> int | None:
    return int(moment.timestamp() * 1000) if moment else None


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
        "retries": task.retries,
        "createdTime": epoch_ms(task.created_at),
        "launchedTime": epoch_ms(task.started_at),
        "completedTime": epoch_ms(task.completed_at),
    }


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
            "executionType": "STOP" if job.state in ("STOPPING", "STOPPED") else "START",
            "virtualCluster": job.virtual_cluster.name,
            "retries": job.retries,
            "attemptIndex": attempt.number if attempt else None,
            "createdTime": epoch_ms(job.created_at),
            "launchedTime": epoch_ms(job.started_at),
            "completedTime": epoch_ms(job.completed_at),
            "appExitCode": job.exit_code,
            "appExitDiagnostics": job.reason,
            "reason": job.reason,
            "totalTaskNumber": job.task_count,
            "totalGpuNumber": job.gpu_count,
        },
        "taskRoles": roles,
    }
