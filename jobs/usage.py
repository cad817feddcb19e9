"""Each running task's resource usage over time: sampled, thinned as it ages, served.

OpenPAI's job exporter sampled every task's CPU, memory, GPU utilisation and GPU memory into
Prometheus, and its web portal charted them per job (its docs' alert-manager.md names the
metrics: ``task_cpu_percent``, ``task_mem_usage_byte``, ``task_gpu_percent``,
``task_gpu_mem_percent``). Here a beat entry calls ``sample`` every ``USAGE_SAMPLE_SECONDS``
(a backend that can tell, ``SupportsUsage``), one insert per round; ``thin`` keeps a row a
minute past ``FINE_FOR`` and a row per 10 minutes past ``COARSE_AFTER``, so a job that runs
for weeks keeps a bounded series; ``forget`` (the reconcile pass's cleanup) deletes the rows of
jobs ended more than ``USAGE_RETENTION_DAYS`` ago.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import OuterRef, Subquery
from django.utils import timezone

from backends.base import Backend, SupportsUsage
from jobs.models import Job, JobAttempt, Task, TaskUsage
from jobs.states import TaskState

log = logging.getLogger(__name__)
MB = 1024 * 1024
FINE_FOR = timedelta(minutes=10)  # every sample is kept this long
COARSE_AFTER = timedelta(hours=6)  # then one a minute until this age, then one per 10 minutes
TIERS = ((FINE_FOR, timedelta(minutes=1)), (COARSE_AFTER, timedelta(minutes=10)))
# How far back of its boundary one thinning looks: rows a thinning missed for longer (beat
# down for a day) stay as they are until their job's retention ends.
THIN_LOOKBACK = timedelta(days=1)
THIN_KEY = "portal:usage:thinned"  # in the cache while the last thinning is recent
THIN_EVERY_SECONDS = 60
IDLE_GPU_PERCENT = 5.0  # "idle GPU": every sample of the last IDLE_GPU_FOR below this
IDLE_GPU_FOR = timedelta(minutes=10)
NEAR_MEMORY_LIMIT = 0.9  # "near its memory limit": the last sample above this share of memoryMB
FIELDS = ["time", "cpu", "memoryMB", "gpuUtil", "gpuMemoryMB"]


def sample(backend: Backend, now: datetime | None = None) -> int:
    """One sample of every running task, in three queries whatever their number (the tasks,
    their previous samples, one insert); the number of rows written. CPU is the cores used
    since the previous sample, from the backend's cumulative CPU seconds (none for a task's
    first sample, or after its counter restarted: a retry runs in a new cgroup), or the cores
    the backend measured itself over its own window (Kubernetes' metrics API)."""
    if not isinstance(backend, SupportsUsage):
        return 0
    now = now or timezone.now()
    tasks = list(
        Task.objects.filter(state=TaskState.RUNNING).exclude(backend_ref="").only("backend_ref")
    )
    if not tasks:
        return 0
    readings = backend.usage([task.backend_ref for task in tasks])
    measured = [task for task in tasks if task.backend_ref in readings]
    latest = TaskUsage.objects.filter(task_id=OuterRef("task_id")).order_by("-time")
    previous = {
        row.task_id: row
        for row in TaskUsage.objects.filter(
            task_id__in=[t.id for t in measured], time=Subquery(latest.values("time")[:1])
        ).only("task_id", "time", "cpu_seconds")
    }
    rows = []
    for task in measured:
        usage = readings[task.backend_ref]
        rows.append(
            TaskUsage(
                task=task,
                time=now,
                cpu=usage.cpu_cores
                if usage.cpu_cores is not None
                else _rate(previous.get(task.id), usage.cpu_seconds, now),
                cpu_seconds=usage.cpu_seconds,
                memory_bytes=usage.memory_bytes,
                gpu_util=usage.gpu_util,
                gpu_memory_bytes=usage.gpu_memory_bytes,
            )
        )
    TaskUsage.objects.bulk_create(rows)
    return len(rows)


def _rate(before: TaskUsage | None, cpu_seconds: float | None, now: datetime) -> float | None:
    if before is None or before.cpu_seconds is None or cpu_seconds is None:
        return None
    elapsed = (now - before.time).total_seconds()
    if elapsed <= 0 or cpu_seconds < before.cpu_seconds:
        return None
    return round((cpu_seconds - before.cpu_seconds) / elapsed, 3)


def sample_and_thin(backend: Backend) -> int:
    """What beat runs: a sample, and a thinning at most every ``THIN_EVERY_SECONDS``."""
    written = sample(backend)
    if cache.add(THIN_KEY, timezone.now().isoformat(), THIN_EVERY_SECONDS):
        thin()
    return written


def thin(now: datetime | None = None) -> int:
    """Downsample the rows past each tier's age, bucket by bucket of the tier's step (its
    boundary aligned to its buckets, so a bucket is thinned once, whole): the rows of a bucket
    become one at its start, CPU and GPU utilisation averaged, memory and GPU memory at their
    peak (the figures a limit or a warning is about), the CPU counter at its last value. The
    number of rows removed. Plain ORM, as on SQLite (``make run``) as on PostgreSQL: a minute's
    rows of every running task are a few thousand at most."""
    now = now or timezone.now()
    removed = 0
    with transaction.atomic():
        for age, step in TIERS:
            end = _bin(now - age, step)
            rows = TaskUsage.objects.filter(time__gte=end - THIN_LOOKBACK, time__lt=end)
            buckets: dict[tuple[int, datetime], list[TaskUsage]] = {}
            for row in rows.order_by("task_id", "time"):
                buckets.setdefault((row.task_id, _bin(row.time, step)), []).append(row)
            merged = [
                _merged(task_id, start, group)
                for (task_id, start), group in buckets.items()
                if len(group) > 1
            ]
            doomed = [
                row.id for (_, _), group in buckets.items() if len(group) > 1 for row in group
            ]
            for chunk in range(0, len(doomed), 1000):
                TaskUsage.objects.filter(id__in=doomed[chunk : chunk + 1000]).delete()
            TaskUsage.objects.bulk_create(merged)
            removed += len(doomed) - len(merged)
    return removed


def _merged(task_id: int, start: datetime, group: list[TaskUsage]) -> TaskUsage:
    def mean(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return sum(known) / len(known) if known else None

    def peak(values: list[Any]) -> Any:
        known = [v for v in values if v is not None]
        return max(known) if known else None

    return TaskUsage(
        task_id=task_id,
        time=start,
        cpu=mean([r.cpu for r in group]),
        cpu_seconds=peak([r.cpu_seconds for r in group]),
        memory_bytes=peak([r.memory_bytes for r in group]),
        gpu_util=mean([r.gpu_util for r in group]),
        gpu_memory_bytes=peak([r.gpu_memory_bytes for r in group]),
    )


ORIGIN = datetime(2000, 1, 1, tzinfo=UTC)  # where the buckets are counted from


def _bin(moment: datetime, step: timedelta) -> datetime:
    """The start of the bucket of ``step`` that holds ``moment``."""
    return ORIGIN + ((moment - ORIGIN) // step) * step


def forget(now: datetime | None = None) -> int:
    """Delete the samples of jobs ended more than ``USAGE_RETENTION_DAYS`` ago."""
    now = now or timezone.now()
    cutoff = now - timedelta(days=settings.USAGE_RETENTION_DAYS)
    deleted, _ = TaskUsage.objects.filter(task__attempt__job__completed_at__lt=cutoff).delete()
    return deleted


def job_usage(job: Job, attempt: JobAttempt | None, now: datetime | None = None) -> dict[str, Any]:
    """What ``GET .../usage`` answers and the job page charts: each task of ``attempt`` with
    its points ``[epoch ms, cpu cores, memory MB, GPU %, GPU memory MB]``, its limits and its
    warnings (two queries)."""
    now = now or timezone.now()
    tasks = list(attempt.tasks.order_by("role", "index")) if attempt else []
    points: dict[int, list[list[float | int | None]]] = {task.id: [] for task in tasks}
    rows = TaskUsage.objects.filter(task_id__in=list(points)).order_by("task_id", "time")
    for task_id, moment, cpu, memory, gpu_util, gpu_memory in rows.values_list(
        "task_id", "time", "cpu", "memory_bytes", "gpu_util", "gpu_memory_bytes"
    ):
        points[task_id].append(
            [int(moment.timestamp() * 1000), cpu, _mb(memory), gpu_util, _mb(gpu_memory)]
        )
    answer = []
    for task in tasks:
        resources = job.protocol["taskRoles"][task.role]["resourcePerInstance"]
        entry: dict[str, Any] = {
            "taskRole": task.role,
            "taskIndex": task.index,
            "state": task.state,
            "cpu": resources.get("cpu", 0),
            "memoryMB": resources.get("memoryMB", 0),
            "gpu": resources.get("gpu", 0),
            "points": points[task.id],
        }
        entry["warnings"] = warnings(entry, now) if task.state == TaskState.RUNNING else []
        answer.append(entry)
    return {
        "attempt": attempt.number if attempt else None,
        "sampleSeconds": settings.USAGE_SAMPLE_SECONDS,
        "fields": FIELDS,
        "tasks": answer,
    }


def _mb(value: int | None) -> float | None:
    return None if value is None else round(value / MB, 1)


def warnings(task: dict[str, Any], now: datetime) -> list[dict[str, str]]:
    """A running task's warnings: its GPUs idle (below ``IDLE_GPU_PERCENT`` in every sample
    of the last ``IDLE_GPU_FOR``, sampled that long), its memory near its memoryMB."""
    found = []
    points, label = task["points"], f"{task['taskRole']}-{task['taskIndex']}"
    start = (now - IDLE_GPU_FOR).timestamp() * 1000
    recent = [p[3] for p in points if p[0] >= start and p[3] is not None]
    sampled_long_enough = bool(points) and points[0][0] <= start + 1000 * _slack()
    if task["gpu"] and recent and sampled_long_enough and max(recent) < IDLE_GPU_PERCENT:
        minutes = int(IDLE_GPU_FOR.total_seconds() // 60)
        found.append(
            {
                "kind": "idleGpu",
                "message": f"{label}: idle GPU: its GPU utilisation stayed below "
                f"{IDLE_GPU_PERCENT:g}% for the last {minutes} minutes",
            }
        )
    memory = next((p[2] for p in reversed(points) if p[2] is not None), None)
    limit = task["memoryMB"]
    if memory is not None and limit and memory > NEAR_MEMORY_LIMIT * limit:
        found.append(
            {
                "kind": "nearMemoryLimit",
                "message": f"{label} is near its memory limit: {memory:.0f} of its "
                f"{limit} MB memoryMB ({100 * memory / limit:.0f}%); past it the task is "
                "killed (OOMKilled)",
            }
        )
    return found


def _slack() -> float:
    """A task sampled from within one sample period of the window's start counts as sampled
    for the whole window."""
    return 2 * float(settings.USAGE_SAMPLE_SECONDS)
