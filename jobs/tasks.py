"""Celery tasks: thin wrappers that take ids and call the lifecycle."""

from __future__ import annotations

from celery import shared_task

from clusters.registry import get_backend
from jobs.reconcile import reconcile as reconcile_pass


@shared_task(name="jobs.tasks.reconcile", ignore_result=True)
def reconcile() -> dict[str, int | bool]:
    report = reconcile_pass(get_backend())
    return {
        "admitted": report.admitted,
        "launched": report.launched,
        "changed_tasks": report.changed_tasks,
        "finished_jobs": report.finished_jobs,
        "skipped": report.skipped,
    }
