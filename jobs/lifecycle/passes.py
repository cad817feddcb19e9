"""The reconcile pass: observe, settle, stop, admit, launch (each step a module of this
package), in that order. Woken by events, and by beat.

One pass holds a Redis lock so that two workers never launch the same task twice; every
update inside it is also a compare-and-swap, so a pass that runs twice changes nothing.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager

import redis
import redis.backoff
import redis.retry
from django.conf import settings

from clusters.backends.base import Backend, BackendUnavailable
from jobs import news, wakeup
from jobs.lifecycle.admit import admit
from jobs.lifecycle.cleanup import cleanup
from jobs.lifecycle.launch import launch
from jobs.lifecycle.observe import observe
from jobs.lifecycle.report import PassReport
from jobs.lifecycle.settle import settle, settle_orphans
from jobs.lifecycle.stop import send_stops
from jobs.models import Task
from jobs.wakeup import FULL_KEY, QUEUED_KEY, WANTED_KEY, redis_client

log = logging.getLogger(__name__)
LOCK_NAME = "portal:reconcile"
MAX_PASSES = 5  # passes one task runs back to back while more is wanted
LAST_RUN_KEY = "portal:reconcile:last-run-at"  # when the last pass ended (Unix time)
FIRST_ASKED_KEY = "portal:reconcile:first-asked-at"  # when a page first asked, before any pass
# What GET /metrics reads (portal.metrics): passes ended and their seconds in all (a summary's
# count and sum, since Redis started), and passes the backend failed (BackendUnavailable).
PASSES_KEY = "portal:reconcile:passes"
PASS_SECONDS_KEY = "portal:reconcile:pass-seconds"  # noqa: S105 (a key, not a secret)
BACKEND_ERRORS_KEY = "portal:reconcile:backend-errors"


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


def reconcile(backend: Backend, full: bool = False) -> PassReport:
    """Passes while one is wanted (at most ``MAX_PASSES``, then another task is queued);
    skipped when another runs (which sees "wanted" when it ends and goes round again).

    The first pass is a full one when ``full`` (beat's safety net), the others wake-ups: each
    observes the tasks recorded as changed (``jobs.wakeup``) and forgets them only once it
    has applied them, so a worker that dies mid-pass leaves them to the next pass.
    """
    client = redis_client(settings.REDIS_URL)
    client.delete(QUEUED_KEY)
    if full:  # left for the pass that runs now, should this task find one running
        client.set(FULL_KEY, 1)
        client.set(WANTED_KEY, 1)
    report = PassReport(skipped=True)
    for _ in range(MAX_PASSES):
        with reconcile_lock() as got:
            if not got:
                return report
            client.delete(WANTED_KEY)
            full = bool(client.delete(FULL_KEY))
            changes = wakeup.changed_tasks()
            try:
                report = run_pass(backend, None if full else set(changes))
            except BackendUnavailable:
                count_backend_error(client)
                raise
            wakeup.forget_changed(changes)
        if not client.exists(WANTED_KEY):
            return report
    wakeup.request_pass()  # still wanted: a new task, so that beat is not the one to see it
    return report


def run_pass(backend: Backend, changed: Collection[str] | None = None) -> PassReport:
    """One pass. ``changed`` None: the full pass, which observes every live task and settles
    every running attempt. Else a wake-up, whose work is proportional to what changed: it
    observes the tasks ``changed`` names and settles the attempts it touched (and jobs being
    stopped). Either way capacity freed by what ended is used in the same pass: settle first,
    then admit and launch, then observe what was launched (so it shows running at once)."""
    report = PassReport()
    started = time.monotonic()
    with news.gathered() as gathered:
        observe(backend, report, changed)
        # A wake-up settles the jobs of the tasks it was told of even when observing them
        # changed nothing: a pass that died after saving their ends left them unsettled.
        scope = None if changed is None else jobs_of(changed) | report.touched_jobs
        settle(backend, report, scope)
        if changed is None:
            settle_orphans(backend, report)
        send_stops(backend, report)
        settled = set(report.touched_jobs)
        admit(backend, report, full=changed is None)
        launched = launch(backend, report)
        if launched:
            observe(backend, report, launched)
        if report.touched_jobs - settled:  # launched, or failed to launch
            settle(backend, report, report.touched_jobs - settled)
        gathered.jobs.update(report.touched_jobs)
        gathered.queues.update(report.touched_queues)
    if changed is None:
        cleanup(backend)
    try:
        with redis_client(settings.REDIS_URL).pipeline(transaction=False) as ended:
            ended.set(LAST_RUN_KEY, time.time())
            ended.incr(PASSES_KEY)
            ended.incrbyfloat(PASS_SECONDS_KEY, time.monotonic() - started)
            ended.execute()
    except redis.exceptions.RedisError:
        log.warning("could not record the end of the reconcile pass", exc_info=True)
    return report


def count_backend_error(client: redis.Redis) -> None:
    try:
        client.incr(BACKEND_ERRORS_KEY)
    except redis.exceptions.RedisError:
        log.warning("could not count the backend's error", exc_info=True)


def jobs_of(refs: Collection[str]) -> set[int]:
    if not refs:
        return set()
    tasks = Task.objects.filter(backend_ref__in=list(refs))
    return set(tasks.values_list("attempt__job_id", flat=True))


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
