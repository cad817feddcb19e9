"""The reconcile loop's state in Redis: "a pass is wanted", which tasks changed since the last
one, the lock one pass holds, and when passes ended (for the scheduler banner and /metrics).
Every key of the loop is written here and nowhere else.

Imported by whatever notices a change (a submission, a stop, the local backend's listener of
ended tasks, a Kubernetes watch) and by the pass itself; it imports neither, so that none of
them has to hide an import inside a function. The reconcile task is sent by name.

The tasks that changed are kept in a Redis hash, ref -> a token of the event that named it,
until a pass has applied them: a worker that dies mid-pass leaves them for the next pass, and
a ref named again while a pass runs (a new token) stays for the next pass instead of being
dropped with the one the pass read. A pass may claim once more before it admits
(``claim_more``): then what was asked for meanwhile is its own, not the next pass's.
"""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

import redis
import redis.backoff
import redis.retry
from celery import current_app
from django.conf import settings

WANTED_KEY = "portal:reconcile:wanted"  # set: something changed since the last pass began
QUEUED_KEY = "portal:reconcile:queued"  # set: a reconcile task is queued and has not started
LATER_KEY = "portal:reconcile:later"  # set while a reconcile task sent with a delay waits
FULL_KEY = "portal:reconcile:full"  # set: a full pass is wanted (beat's, or after a relist)
CHANGED_KEY = "portal:reconcile:changed"  # hash: task ref -> token of the latest event naming it
RECONCILE_TASK = "jobs.tasks.reconcile"
log = logging.getLogger(__name__)
LOCK_NAME = "portal:reconcile"
LAST_RUN_KEY = "portal:reconcile:last-run-at"  # when the last pass ended (Unix time)
FIRST_ASKED_KEY = "portal:reconcile:first-asked-at"  # when a page first asked, before any pass
# What GET /metrics reads (portal.metrics): passes ended and their seconds in all (a summary's
# count and sum, since Redis started), and passes the backend failed (BackendUnavailable).
PASSES_KEY = "portal:reconcile:passes"
PASS_SECONDS_KEY = "portal:reconcile:pass-seconds"  # noqa: S105 (a key, not a secret)
BACKEND_ERRORS_KEY = "portal:reconcile:backend-errors"
# The stamp of the process (its admission book) that last wrote where waiting jobs stand.
STANDING_BY_KEY = "portal:reconcile:standing-by"


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
    return decoded(redis_client(settings.REDIS_URL).hgetall(CHANGED_KEY))


def decoded(changed: dict[bytes, bytes]) -> dict[str, str]:
    """The hash of changed tasks as Redis gives it, ref -> token."""
    return {ref.decode(): token.decode() for ref, token in changed.items()}


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


# -- the handshake of a reconcile task (jobs.lifecycle.passes.reconcile) ----------------------


def task_started(full: bool) -> None:
    """A reconcile task starts: none is queued any more; beat's (``full``) leaves a full pass
    wanted, for the pass that runs now should this task find one running."""
    client = redis_client(settings.REDIS_URL)
    client.delete(QUEUED_KEY)
    if full:
        client.set(FULL_KEY, 1)
        client.set(WANTED_KEY, 1)


def claim() -> tuple[bool, dict[str, str]]:
    """A pass begins (holding the lock): whether it is to be full, and the tasks recorded as
    changed (``forget_changed`` them once applied). What is asked from now on is for the next."""
    client = redis_client(settings.REDIS_URL)
    client.delete(WANTED_KEY)
    return bool(client.delete(FULL_KEY)), changed_tasks()


def claim_more(claimed: Mapping[str, str]) -> dict[str, str] | None:
    """Mid-pass: when a pass was asked for since ``claim`` (not a full one: that is left for
    the next pass), claim it as ``claim`` does; the tasks changed since ``claimed`` (new refs,
    or refs named again), with their tokens. None when nothing was asked, or when Redis does
    not answer (the pass goes on with what it claimed)."""
    client = redis_client(settings.REDIS_URL)
    try:
        with client.pipeline() as pipe:  # one transaction: what was asked and what changed
            pipe.delete(WANTED_KEY)
            pipe.exists(FULL_KEY)
            pipe.hgetall(CHANGED_KEY)
            wanted, full, changed = pipe.execute()
        if wanted and full:
            client.set(WANTED_KEY, 1)  # for the next pass, a full one
    except redis.exceptions.RedisError:
        log.warning("could not claim what was asked for during the pass", exc_info=True)
        return None
    if not wanted or full:
        return None
    return {ref: token for ref, token in decoded(changed).items() if claimed.get(ref) != token}


def still_wanted() -> bool:
    return bool(redis_client(settings.REDIS_URL).exists(WANTED_KEY))


@contextmanager
def reconcile_lock() -> Iterator[bool]:
    lock = redis_client(settings.REDIS_URL).lock(LOCK_NAME, timeout=120, blocking=False)
    got = lock.acquire()
    try:
        yield bool(got)
    finally:
        if got:
            try:
                lock.release()
            except redis.exceptions.LockError:
                log.warning("the reconcile lock expired before the pass ended")


def record_pass(seconds: float) -> None:
    """A pass ended after ``seconds``: its time, and the count and sum /metrics reads."""
    try:
        with redis_client(settings.REDIS_URL).pipeline(transaction=False) as ended:
            ended.set(LAST_RUN_KEY, time.time())
            ended.incr(PASSES_KEY)
            ended.incrbyfloat(PASS_SECONDS_KEY, seconds)
            ended.execute()
    except redis.exceptions.RedisError:
        log.warning("could not record the end of the reconcile pass", exc_info=True)


def stamp_standing(stamp: str) -> bool:
    """The book ``stamp`` is about to write where waiting jobs stand. False when Redis cannot
    be told: then it must not write, or another process would trust what it remembers."""
    try:
        redis_client(settings.REDIS_URL).set(STANDING_BY_KEY, stamp)
    except redis.exceptions.RedisError:
        log.warning("could not stamp the waiting jobs' standing", exc_info=True)
        return False
    return True


def standing_stamp() -> str | None:
    """Who last wrote where waiting jobs stand (``stamp_standing``); None when unknown."""
    try:
        stamp = redis_client(settings.REDIS_URL).get(STANDING_BY_KEY)
    except redis.exceptions.RedisError:
        return None
    return stamp.decode() if isinstance(stamp, bytes) else None


def count_backend_error() -> None:
    try:
        redis_client(settings.REDIS_URL).incr(BACKEND_ERRORS_KEY)
    except redis.exceptions.RedisError:
        log.warning("could not count the backend's error", exc_info=True)


@functools.cache
def quick_client(url: str) -> redis.Redis:
    """For reads a page makes in passing: short timeouts and no retry, so that a Redis that
    is down costs a page half a second at most."""
    no_retry = redis.retry.Retry(redis.backoff.NoBackoff(), 0)
    return redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5, retry=no_retry)


def seconds_since_last_pass() -> tuple[float, bool]:
    """How long no reconcile pass has ended, and whether one ever did (since Redis started):
    before the first pass, the time since the portal was first asked, so that a fresh start is
    not called late while beat's first pass is on its way (issue 28). Raises ``RedisError``
    when Redis does not answer."""
    client = quick_client(settings.REDIS_URL)
    ended = client.get(LAST_RUN_KEY)
    if ended is not None:
        return max(0.0, time.time() - float(ended)), True
    with client.pipeline() as both:  # one round trip: the first asker's time stays
        both.set(FIRST_ASKED_KEY, time.time(), nx=True)
        both.get(FIRST_ASKED_KEY)
        first = both.execute()[1]
    return max(0.0, time.time() - float(first)), False


def pass_figures() -> tuple[int, float, int]:
    """Passes ended, their seconds in all, and passes the backend failed, since Redis started
    (GET /metrics). Raises ``RedisError`` when Redis does not answer."""
    passes, seconds, errors = quick_client(settings.REDIS_URL).mget(
        PASSES_KEY, PASS_SECONDS_KEY, BACKEND_ERRORS_KEY
    )
    return int(passes or 0), float(seconds or 0.0), int(errors or 0)
