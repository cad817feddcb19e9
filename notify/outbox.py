"""Outbox rows for an event, and their delivery queued once the rows are committed.

A row's unique key makes the same event on the same channel never a second row, whoever adds
it and however often (a pass run twice, two sweeps at once): inserts ignore a key that exists.
Queueing is best effort: a row whose task was lost (Redis down) is sent by beat's sweep.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from functools import partial

from celery import current_app
from django.db import transaction

from notify.models import Notification

log = logging.getLogger(__name__)
DELIVER_TASK = "notify.tasks.deliver"


def add(rows: Iterable[Notification]) -> None:
    """Insert ``rows`` (those whose key exists are left out) and queue their delivery after
    the transaction commits."""
    rows = list(rows)
    if not rows:
        return
    Notification.objects.bulk_create(rows, ignore_conflicts=True)
    transaction.on_commit(partial(queue_pending, [row.key for row in rows]), robust=True)


def queue_pending(keys: list[str]) -> None:
    ids = Notification.objects.filter(key__in=keys, status=Notification.PENDING).values_list(
        "id", flat=True
    )
    for notification_id in ids:
        queue(notification_id)


def queue(notification_id: int, countdown: float | None = None) -> None:
    """Queue one delivery, by name (``notify.tasks`` imports this module). No retry of the
    publish: a broker that is down must not hold up the reconcile pass that got here."""
    try:
        current_app.signature(DELIVER_TASK, args=(notification_id,)).apply_async(
            countdown=countdown, retry=False
        )
    except Exception:  # the sweep sends it: a row stays pending until sent
        log.warning("could not queue alert %s; the sweep will send it", notification_id)
