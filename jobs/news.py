"""News of a job's change, sent after the transaction that made it commits.

The database is the source of truth; the channel layer only tells open pages to look again.
"""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

log = logging.getLogger(__name__)


def group_name(job_id: int) -> str:
    return f"job-{job_id}"


def publish(job_id: int) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(group_name(job_id), {"type": "job.changed", "job": job_id})
    except Exception:  # news is best effort: a page that misses it catches up on reconnect
        log.warning("could not publish news of job %s", job_id, exc_info=True)


def after_commit(job_id: int, reconcile: bool = False) -> None:
    transaction.on_commit(lambda: publish(job_id), robust=True)
    if reconcile:
        from jobs.tasks import reconcile as reconcile_task

        transaction.on_commit(reconcile_task.delay, robust=True)
