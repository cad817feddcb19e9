"""News of a job's change, sent after the transaction that made it commits.

The database is the source of truth; the channel layer only tells open pages to look again.
Inside a reconcile pass (``gathered()``) news is collected and sent once per job, in one round
of sends, instead of once per change: the jobs that finished as soon as the pass has settled
them (``send_finished``), the rest at its end. A waiting job's page also listens to its
virtual cluster's queue: when positions in a queue move, one message tells every waiting page
of that queue, instead of one message per waiting job (thousands, in a busy cluster).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from channels.layers import get_channel_layer
from django.db import transaction

log = logging.getLogger(__name__)
SEND_SECONDS = 10.0  # the most a round of sends may take before it is given up


@dataclass
class Gathered:
    """News to send: jobs that changed, and virtual clusters whose queue moved (by name)."""

    jobs: set[int] = field(default_factory=set)
    queues: set[str] = field(default_factory=set)
    finished: set[int] = field(default_factory=set)  # jobs that reached a final state
    sent: set[int] = field(default_factory=set)  # sent already: finished, they change no more


_gathering: ContextVar[Gathered | None] = ContextVar("news_gathering", default=None)


def group_name(job_id: int) -> str:
    return f"job-{job_id}"


def queue_group_name(vc_name: str) -> str:
    return f"queue-{vc_name}"  # virtual cluster names are slugs: valid in a group name


def publish(job_ids: Iterable[int], queues: Iterable[str] = (), finished: bool = False) -> None:
    """Tell the pages of ``job_ids`` and of the ``queues`` to look again; ``finished``: those
    jobs have reached a final state (without it, they may have), so that a client waiting for
    one (``jobs.api.waiting``) is answered without reading its state first."""
    sends = [
        (group_name(i), {"type": "job.changed", "job": i, "finished": finished})
        for i in sorted(set(job_ids))
    ]
    sends += [(queue_group_name(q), {"type": "queue.changed"}) for q in sorted(set(queues))]
    layer = get_channel_layer()
    if layer is None or not sends:
        return

    async def send_all() -> None:
        for group, message in sends:
            await layer.group_send(group, message)

    sent = asyncio.run_coroutine_threadsafe(send_all(), sending_loop(os.getpid()))
    try:
        sent.result(timeout=SEND_SECONDS)
    except Exception:  # news is best effort: a page that misses it catches up on reconnect
        sent.cancel()
        log.warning("could not publish news to %s", [g for g, _ in sends[:10]], exc_info=True)


@functools.cache
def sending_loop(pid: int) -> asyncio.AbstractEventLoop:
    """The event loop this process (``pid``: a forked worker has none of its parent's threads)
    sends news on, run by a thread of its own. The channel layer keeps its Redis connections
    per event loop: sending from a new loop each time, as ``async_to_sync`` does, connected
    anew each time (1.5 ms a message against 0.14 ms here; 2-3 ms of a reconcile pass that
    settles one job)."""
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name=f"news-{pid}", daemon=True).start()
    return loop


@contextmanager
def gathered() -> Iterator[Gathered]:
    """Collect the news sent inside the block; send what ``send_finished`` has not, at the
    end (the jobs that finished since, said so as it says them)."""
    news = Gathered()
    token = _gathering.set(news)
    try:
        yield news
    finally:
        _gathering.reset(token)
        send_finished(news)
        publish(news.jobs - news.sent, news.queues)


def send_finished(news: Gathered) -> None:
    """Send the news of the jobs that have finished so far, before the rest of the pass.

    Measured reason: a pass settles the jobs whose tasks ended, then admits and launches the
    next; sent at its end, a job's end waited for that before a page or a waiting client
    heard of it: from a trivial job's end in its row to a waiting client's web server hearing
    of it, 8.6 ms against 4.9 ms on an idle cluster (``bench/e2e.py``'s portal, 2 CPUs,
    medians of 15), and each launch of the pass (13-20 ms there) on a full one. A finished
    job changes no more in the pass, so it is not sent again at the end."""
    publish(news.finished - news.sent, finished=True)
    news.sent |= news.finished


def after_commit(job_id: int, finished: bool = False) -> None:
    """Tell the job's open pages once the transaction commits (inside a pass: at its end, or
    once it has settled, for a job that ``finished`` in a final state)."""
    gathering = _gathering.get()
    if gathering is not None:
        gathered = gathering.finished if finished else gathering.jobs
        transaction.on_commit(lambda: gathered.add(job_id), robust=True)
    else:
        transaction.on_commit(lambda: publish([job_id], finished=finished), robust=True)
