"""Celery tasks: thin wrappers that take ids and call the lifecycle."""

from __future__ import annotations

from celery import shared_task

from clusters.registry import get_backend
from jobs.lifecycle.passes import reconcile as reconcile_pass
from jobs.usage import sample_and_thin


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
