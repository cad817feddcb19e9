"""Celery tasks: thin wrappers that take ids and call the lifecycle."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from clusters import usage
from clusters.registry import get_backend
from jobs.lifecycle.passes import reconcile as reconcile_pass
from jobs.usage import sample_and_thin
from jobs.vc_usage import overview


@shared_task(name="jobs.tasks.reconcile", ignore_result=True)
def reconcile(full: bool = False) -> dict[str, int | bool]:
    """Passes while one is wanted; beat's (``full``) observes every live task first."""
    report = reconcile_pass(get_backend(), full=full)
    return {
        "admitted": report.admitted,
        "launched": report.launched,
        "changed_tasks": report.changed_tasks,
        "finished_jobs": report.finished_jobs,
        "skipped": report.skipped,
    }


@shared_task(name="jobs.tasks.sample_usage", ignore_result=True)
def sample_usage() -> int:
    """Beat's, every ``USAGE_SAMPLE_SECONDS``: the running tasks' usage (``jobs.usage``)."""
    return sample_and_thin(get_backend())


@shared_task(name="jobs.tasks.sample_vc_usage", ignore_result=True)
def sample_vc_usage() -> int:
    """Record every virtual cluster's use now, then thin and expire old samples
    (``clusters.usage``); returns how many samples it recorded."""
    now = timezone.now()
    views, _ = overview()
    recorded = usage.record(views, now)
    usage.prune(now)
    return recorded
