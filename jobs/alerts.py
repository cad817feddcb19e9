"""What ``GET /api/v2/alerts`` lists, in the shape of OpenPAI's (Alertmanager's v1 alerts):
tasks killed for using more than their memory, jobs waiting long, nodes the capacity refresh
has not seen lately and a backend that does not answer. An admin gets every alert; a user the
alerts of their own jobs (labels ``job_name`` and ``username``, as OpenPAI filters them)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.utils import timezone

from backends.base import Backend, BackendUnavailable
from clusters.models import Node
from jobs.access import is_admin
from jobs.models import Job, Task
from jobs.states import JobState

OOM_RULES = ("oom-killed", "oom-kernel")  # jobs.exitspec's rules for the memory limit


def alert(
    name: str,
    severity: str,
    summary: str,
    starts: datetime,
    labels: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "labels": {"alertname": name, "severity": severity, **(labels or {})},
        "annotations": {"summary": summary},
        "startsAt": starts.isoformat(),
        "endsAt": None,
        "generatorURL": "",
        "status": {"state": "active", "silencedBy": [], "inhibitedBy": []},
    }


def job_labels(job: Job) -> dict[str, str]:
    return {
        "job_name": f"{job.owner.username}~{job.name}",
        "username": job.owner.username,
        "virtual_cluster": job.virtual_cluster.name,
    }


def memory_kills(jobs: Any, since: datetime) -> list[dict[str, Any]]:
    tasks = (
        Task.objects.filter(
            attempt__job__in=jobs, completed_at__gte=since, exit_spec__id__in=OOM_RULES
        )
        .select_related("attempt__job__owner", "attempt__job__virtual_cluster")
        .order_by("completed_at", "id")
    )
    return [
        alert(
            "TaskOOMKilled",
            "warn",
            f"task {t.role}-{t.index} of {t.attempt.job} was killed for using more memory "
            f"than its memoryMB",
            t.completed_at or timezone.now(),
            {**job_labels(t.attempt.job), "task_role": t.role, "task_index": str(t.index)},
        )
        for t in tasks
    ]


def long_waits(jobs: Any, now: datetime) -> list[dict[str, Any]]:
    limit = timedelta(seconds=settings.ALERT_JOB_WAITING_SECONDS)
    waiting = (
        jobs.filter(state=JobState.WAITING, created_at__lte=now - limit)
        .select_related("owner", "virtual_cluster")
        .order_by("created_at", "id")
    )
    return [
        alert(
            "JobWaitingTooLong",
            "warn",
            f"job {job} has waited since {job.created_at:%Y-%m-%d %H:%M:%S}: {job.reason}",
            job.created_at,
            job_labels(job),
        )
        for job in waiting
    ]


def cluster_alerts(backend: Backend, now: datetime) -> list[dict[str, Any]]:
    """Nodes not seen for ``ALERT_NODE_SILENT_SECONDS`` and a backend that does not answer."""
    found = []
    silent = now - timedelta(seconds=settings.ALERT_NODE_SILENT_SECONDS)
    for node in Node.objects.filter(updated_at__lt=silent):
        summary = f"node {node.name} has not been seen since {node.updated_at:%Y-%m-%d %H:%M:%S}"
        found.append(
            alert("NodeNotReporting", "error", summary, node.updated_at, {"node": node.name})
        )
    try:
        backend.capacity()
    except BackendUnavailable as exc:
        found.append(
            alert("BackendUnreachable", "error", f"the {backend.name} backend: {exc}", now)
        )
    return found


def alerts_for(user: AbstractBaseUser | AnonymousUser, backend: Backend) -> list[dict[str, Any]]:
    now = timezone.now()
    since = now - timedelta(seconds=settings.ALERT_WINDOW_SECONDS)
    jobs = Job.objects.all() if is_admin(user) else Job.objects.filter(owner_id=user.pk)
    found = memory_kills(jobs, since) + long_waits(jobs, now)
    if is_admin(user):
        found += cluster_alerts(backend, now)
    return found
