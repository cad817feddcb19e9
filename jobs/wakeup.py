"""Waking the reconcile loop: "a pass is wanted", and which tasks changed since the last one.

Imported by whatever notices a change (a submission, a stop, the local backend's listener of
ended tasks, a Kubernetes watch) and by the pass itself; it imports neither, so that none of
them has to hide an import inside a function. The reconcile task is sent by name.

The tasks that changed are kept in a Redis hash, ref -> a token of the event that named it,
until a pass has applied them: a worker that dies mid-pass leaves them for the next pass, and
a ref named again while a pass runs (a new token) stays for the next pass instead of being
dropped with the one the pass read.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable

import redis
from celery import current_app
from django.conf import settings

WANTED_KEY = "portal:reconcile:wanted"  # set: something changed since the last pass began
QUEUED_KEY = "portal:reconcile:queued"  # set: a reconcile task is queued and has not started
LATER_KEY = "portal:reconcile:later"  # set while a reconcile task sent with a delay waits
FULL_KEY = "portal:reconcile:full"  # set: a full pass is wanted (beat's, or after a relist)
CHANGED_KEY = "portal:reconcile:changed"  # hash: task ref -> token of the latest event naming it
RECONCILE_TASK = "jobs.tasks.reconcile"


@functools.cache
def redis_client(url: str) -> redis.Redis:
    """One client (and connection pool) per process and URL."""
    return redis.Redis.from_url(url)


def send_reconcile(countdown: float | None = None) -> None:
    """Queue one reconcile task, to run in ``countdown`` seconds or at once; with
    ``CELERY_TASK_ALWAYS_EAGER``, run it here and now. By name: this module imports no task
    module (the app looks the task up among those it registered)."""
    current_app.signature(RECONCILE_TASK).apply_async(countdown=countdown)


def request_pass_later(seconds: float) -> None:
    """Ask for a pass in ``seconds``, once however often it is asked meanwhile."""
    if current_app.conf.task_always_eager:
        return  # no later here: it would run inside the pass asking for it
    client = redis_client(settings.REDIS_URL)
    if client.set(LATER_KEY, 1, nx=True, px=max(1, int(seconds * 1000))):
        send_reconcile(seconds)


def request_pass() -> None:
    """Ask for a reconcile pass soon, cheaply enough to call on every submission.

    Marks a pass as wanted and queues a reconcile task only when none is queued already: a
    thousand submissions in a second queue one task, not a thousand. The task clears "queued"
    as it starts, and runs passes until nobody wants one any more, so a change made while a
    pass runs is never left for the periodic pass.
    """
    client = redis_client(settings.REDIS_URL)
    with client.pipeline(transaction=False) as pipe:
        pipe.set(WANTED_KEY, 1)
        pipe.set(QUEUED_KEY, 1, nx=True, ex=60)
        queued_now = pipe.execute()[1]
    if queued_now:
        send_reconcile()


def request_full_pass() -> None:
    """Ask for a pass that observes every live task: the watch that reports changes lost track
    of them (a relist) and cannot say which tasks changed."""
    redis_client(settings.REDIS_URL).set(FULL_KEY, 1)
    request_pass()


def tasks_changed(refs: Iterable[str]) -> None:
    """Record that the backend tasks ``refs`` changed (ended, started, ...) and ask for a
    pass: the next pass observes them, and only them unless it is the periodic one."""
    token = uuid.uuid4().hex
    fields = dict.fromkeys(refs, token)
    if not fields:
        return
    redis_client(settings.REDIS_URL).hset(CHANGED_KEY, mapping=fields)
    request_pass()


def changed_tasks() -> dict[str, str]:
    """The refs recorded as changed and not applied yet, with their tokens."""
    raw = redis_client(settings.REDIS_URL).hgetall(CHANGED_KEY)
    return {ref.decode(): token.decode() for ref, token in raw.items()}


def forget_changed(applied: dict[str, str]) -> None:
    """Drop the refs a pass has applied, unless an event named them again meanwhile: read and
    delete in one transaction, which starts over should an event write the hash in between."""
    if not applied:
        return
    refs = list(applied)

    def forget(pipe: redis.client.Pipeline) -> None:
        tokens = pipe.hmget(CHANGED_KEY, refs)
        done = [
            ref for ref, token in zip(refs, tokens, strict=True) if token == applied[ref].encode()
        ]
        pipe.multi()
        if done:
            pipe.hdel(CHANGED_KEY, *done)

    redis_client(settings.REDIS_URL).transaction(forget, CHANGED_KEY)
