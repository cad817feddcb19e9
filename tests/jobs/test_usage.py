"""Sampling each running task's usage (``jobs.usage``), as OpenPAI's job exporter did for its
job metrics: one row per task per round in a fixed number of queries, CPU as cores from the
backend's cumulative CPU seconds, thinned as the rows age, deleted once the job's retention
is over; and the page's warnings (idle GPU, near the memory limit)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from backends.base import Usage
from jobs import usage
from jobs.lifecycle import cleanup
from jobs.models import Job, Task, TaskUsage
from tests.api.helpers import job_with_tasks

pytestmark = pytest.mark.django_db
MB = 1024 * 1024


class Sampled:
    """A backend that tells usage: what ``readings`` holds for each ref now."""

    name = "fake"

    def __init__(self) -> None:
        self.readings: dict[str, Usage] = {}
        self.asked: list[list[str]] = []

    def usage(self, refs: list[str]) -> dict[str, Usage]:
        self.asked.append(list(refs))
        return {ref: self.readings[ref] for ref in refs if ref in self.readings}


def running_task(owner, name: str, ref: str) -> Task:
    job = job_with_tasks(owner, name)
    task = Task.objects.get(attempt__job=job)
    task.backend_ref = ref
    task.save()
    return task


def test_each_round_writes_one_row_per_running_task_in_three_queries(alice):
    backend = Sampled()
    tasks = [running_task(alice, f"job{i}", f"ref-{i}") for i in range(5)]
    Task.objects.filter(id=tasks[4].id).update(state="SUCCEEDED")  # ended: not sampled
    for i in range(4):
        backend.readings[f"ref-{i}"] = Usage(10.0 * i, (i + 1) * 100 * MB)
    start = timezone.now()
    usage.sample(backend, start)  # the first: no CPU rate yet
    for i in range(4):
        backend.readings[f"ref-{i}"] = Usage(10.0 * i + 2.5, (i + 1) * 100 * MB)
    with CaptureQueriesContext(connection) as queries:
        assert usage.sample(backend, start + timedelta(seconds=5)) == 4
    assert len(queries) == 3  # the tasks, their last samples, one insert
    assert backend.asked[-1] == [f"ref-{i}" for i in range(4)]
    latest = TaskUsage.objects.filter(time=start + timedelta(seconds=5)).order_by("task_id")
    assert [row.cpu for row in latest] == [0.5] * 4  # 2.5 CPU seconds in 5 s
    assert [row.memory_bytes for row in latest] == [100 * MB, 200 * MB, 300 * MB, 400 * MB]
    first = TaskUsage.objects.filter(time=start)
    assert [row.cpu for row in first] == [None] * 4


def test_a_restarted_cpu_counter_gives_no_rate_rather_than_a_negative_one(alice):
    backend = Sampled()
    running_task(alice, "hello", "ref")
    now = timezone.now()
    backend.readings["ref"] = Usage(100.0, MB)
    usage.sample(backend, now)
    backend.readings["ref"] = Usage(1.0, MB)  # a retry: a new cgroup, counting from 0
    usage.sample(backend, now + timedelta(seconds=5))
    assert list(TaskUsage.objects.values_list("cpu", flat=True)) == [None, None]


def test_a_backend_that_cannot_tell_usage_is_not_sampled(alice):
    running_task(alice, "hello", "ref")

    class Plain:
        name = "plain"

    assert usage.sample(Plain()) == 0  # type: ignore[arg-type]
    assert not TaskUsage.objects.exists()


def rows_at(task: Task, times: list, cpu: float = 1.0, memory: int = MB) -> None:
    TaskUsage.objects.bulk_create(
        TaskUsage(task=task, time=t, cpu=cpu, cpu_seconds=0, memory_bytes=memory) for t in times
    )


def test_samples_older_than_10_minutes_are_thinned_to_one_a_minute_keeping_the_peak(alice):
    task = running_task(alice, "hello", "ref")
    now = timezone.now().replace(second=30, microsecond=0)
    minute = (now - timedelta(minutes=20)).replace(second=0)
    old = [minute + timedelta(seconds=5 * i) for i in range(12)]  # 12 samples of one minute
    TaskUsage.objects.bulk_create(
        TaskUsage(task=task, time=t, cpu=float(i % 2), memory_bytes=(i + 1) * MB)
        for i, t in enumerate(old)
    )
    recent = [now - timedelta(seconds=5 * i) for i in range(1, 13)]  # the last minute
    rows_at(task, recent)
    usage.thin(now)
    kept = list(TaskUsage.objects.filter(time__lt=now - timedelta(minutes=10)))
    assert len(kept) == 1
    assert kept[0].time == minute
    assert kept[0].cpu == pytest.approx(0.5)  # the minute's average
    assert kept[0].memory_bytes == 12 * MB  # its peak
    assert TaskUsage.objects.filter(time__gte=now - timedelta(minutes=10)).count() == 12
    usage.thin(now)  # again: nothing more to thin
    assert TaskUsage.objects.count() == 13


def test_samples_older_than_6_hours_are_thinned_to_one_per_10_minutes(alice):
    task = running_task(alice, "hello", "ref")
    now = timezone.now()
    start = usage._bin(now - timedelta(hours=8), timedelta(minutes=10))
    rows_at(task, [start + timedelta(minutes=i) for i in range(30)])  # a row a minute, 30 min
    usage.thin(now)
    times = list(TaskUsage.objects.values_list("time", flat=True))
    assert times == [start + timedelta(minutes=10 * i) for i in range(3)]


def test_the_samples_of_a_job_ended_past_the_retention_go_with_the_cleanup(alice, settings):
    settings.USAGE_RETENTION_DAYS = 14
    gone = running_task(alice, "old", "ref-old")
    kept = running_task(alice, "recent", "ref-recent")
    live = running_task(alice, "live", "ref-live")
    now = timezone.now()
    for task in (gone, kept, live):
        rows_at(task, [now - timedelta(days=15), now - timedelta(days=1)])
    Job.objects.filter(id=gone.attempt.job_id).update(completed_at=now - timedelta(days=15))
    Job.objects.filter(id=kept.attempt.job_id).update(completed_at=now - timedelta(days=13))
    cleanup.cleanup(Sampled(), force=True)  # type: ignore[arg-type]
    assert not TaskUsage.objects.filter(task=gone).exists()
    assert TaskUsage.objects.filter(task=kept).count() == 2
    assert TaskUsage.objects.filter(task=live).count() == 2  # still running: all its life


def entry(points: list, gpu: int = 1, memory_mb: int = 1000) -> dict:
    return {"taskRole": "main", "taskIndex": 0, "gpu": gpu, "memoryMB": memory_mb, "points": points}


def point(now, seconds_ago: float, memory: float = 100.0, gpu: float | None = 1.0) -> list:
    return [int((now - timedelta(seconds=seconds_ago)).timestamp() * 1000), 1.0, memory, gpu, 0]


def kinds(found: list) -> list[str]:
    return [w["kind"] for w in found]


def test_a_gpu_below_5_percent_for_10_minutes_is_called_idle(settings):
    settings.USAGE_SAMPLE_SECONDS = 5
    now = timezone.now()
    idle = [point(now, s) for s in range(660, 0, -5)]  # 11 minutes at 1%
    assert kinds(usage.warnings(entry(idle), now)) == ["idleGpu"]
    busy_once = [*idle[:-1], point(now, 1, gpu=40.0)]
    assert usage.warnings(entry(busy_once), now) == []
    too_short = [point(now, s) for s in range(300, 0, -5)]  # sampled for 5 minutes only
    assert usage.warnings(entry(too_short), now) == []
    assert usage.warnings(entry(idle, gpu=0), now) == []  # no GPU: nothing to be idle


def test_memory_above_90_percent_of_memorymb_is_near_its_limit():
    now = timezone.now()
    near = usage.warnings(entry([point(now, 5, 800.0), point(now, 0, 950.0)], gpu=0), now)
    assert kinds(near) == ["nearMemoryLimit"]
    assert "950 of its 1000 MB memoryMB (95%)" in near[0]["message"]
    assert usage.warnings(entry([point(now, 0, 850.0)], gpu=0), now) == []
