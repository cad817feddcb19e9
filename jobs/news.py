"""News of a job's change, sent after the transaction that made it commits.

The database is the source of truth; the channel layer only tells open pages to look again.
Inside a reconcile pass (``gathered()``) news is collected and sent once per job at the end,
in one round of sends, instead of once per change.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

log = logging.getLogger(__name__)
_gathering: ContextVar[set[int] | None] = ContextVar("news_gathering", default=None)


def group_name(job_id: int) -> str:
    return f"job-{job_id}"


def publish(job_ids: Iterable[int]) -> None:
    ids = sorted(set(job_ids))
    layer = get_channel_layer()
    if layer is None or not ids:
        return

    async def send_all() -> None:
        for job_id in ids:
            await layer.group_send(group_name(job_id), {"type": "job.changed", "job": job_id})

    try:
        async_to_sync(send_all)()
    except Exception:  # news is best effort: a page that misses it catches up on reconnect
        log.warning("could not publish news of jobs %s", ids[:10], exc_info=True)


@contextmanager
def gathered() -> Iterator[set[int]]:
    """Collect the news sent inside the block; send it once, at the end."""
    ids: set[int] = set()
    token = _gathering.set(ids)
    try:
        yield ids
    finally:
        _gathering.reset(token)
        publish(ids)


def after_commit(job_id: int, reconcile: bool = False, new: bool = False) -> None:
    """Tell the job's open pages once the transaction commits (not for a ``new`` job: no page
    can be open on it yet), and with ``reconcile`` ask for a reconcile pass."""
    gathering = _gathering.get()
    if gathering is not None and not new:
        transaction.on_commit(lambda: gathering.add(job_id), robust=True)
    elif not new:
        transaction.on_commit(lambda: publish([job_id]), robust=True)
    if reconcile:
        from jobs.reconcile import request_pass

        transaction.on_commit(request_pass, robust=True)
