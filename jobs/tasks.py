"""Celery tasks: thin wrappers that take ids and call the lifecycle."""

from __future__ import annotations

from celery import shared_task

from clusters.registry import get_backend
from jobs.lifecycle.passes import reconcile as reconcile_pass


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
