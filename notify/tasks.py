"""Celery tasks: thin wrappers that take ids and call ``delivery`` and ``sweep``."""

from __future__ import annotations

from dataclasses import asdict

from celery import Task, shared_task

from clusters.registry import get_backend
from notify import delivery
from notify.sweep import sweep as sweep_once


@shared_task(bind=True, name="notify.tasks.deliver", ignore_result=True, max_retries=None)
def deliver(self: Task, notification_id: int) -> None:
    """One try of one row; a failed try is tried again after the row's backoff. The row, not
    Celery, counts the tries (``NOTIFY_MAX_TRIES``), so that the count survives a lost task and
    shows on the owner's page. Run in place (CELERY_TASK_ALWAYS_EAGER), a retry would block
    its caller: the sweep makes it instead."""
    wait = delivery.deliver(notification_id)
    if wait is not None and not self.request.is_eager:
        raise self.retry(countdown=wait, max_retries=None)


@shared_task(name="notify.tasks.sweep", ignore_result=True)
def sweep() -> dict[str, int]:
    """Beat's, every ``NOTIFY_SWEEP_SECONDS`` (``notify.sweep``)."""
    return asdict(sweep_once(get_backend()))
