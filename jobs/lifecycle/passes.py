"""The reconcile pass: observe, settle, stop, admit, launch (each step a module of this
package), in that order. Woken by events, and by beat.

One pass holds a Redis lock so that two workers never launch the same task twice; every
update inside it is also a compare-and-swap, so a pass that runs twice changes nothing. The
loop's state in Redis (who wants a pass, what changed, the lock, when the last pass ended) is
``jobs.wakeup``'s.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping

from backends.base import Backend, BackendUnavailable
from jobs import news, wakeup
from jobs.lifecycle.admit import admit
from jobs.lifecycle.book import BOOK
from jobs.lifecycle.cleanup import cleanup
from jobs.lifecycle.launch import launch
from jobs.lifecycle.observe import observe
from jobs.lifecycle.report import PassReport
from jobs.lifecycle.settle import settle, settle_orphans
from jobs.lifecycle.stop import send_stops

MAX_PASSES = 5  # passes one task runs back to back while more is wanted


def reconcile(backend: Backend, full: bool = False) -> PassReport:
    """Passes while one is wanted (at most ``MAX_PASSES``, then another task is queued);
    skipped when another runs (which sees "wanted" when it ends and goes round again).

    The first pass is a full one when ``full`` (beat's safety net), the others wake-ups: each
    observes the tasks recorded as changed (``jobs.wakeup``) and forgets them only once it
    has applied them, so a worker that dies mid-pass leaves them to the next pass.
    """
    wakeup.task_started(full)
    report = PassReport(skipped=True)
    for _ in range(MAX_PASSES):
        with wakeup.reconcile_lock() as got:
            if not got:
                return report
            full, changes = wakeup.claim()
            try:
                report = run_pass(backend, None if full else changes, take_more=not full)
            except BackendUnavailable:
                wakeup.count_backend_error()
                raise
            wakeup.forget_changed({**changes, **report.claimed})
        if not wakeup.still_wanted():
            return report
    wakeup.request_pass()  # still wanted: a new task, so that beat is not the one to see it
    return report


def run_pass(
    backend: Backend, changed: Collection[str] | None = None, take_more: bool = False
) -> PassReport:
    """One pass. ``changed`` None: the full pass, which observes every live task and settles
    every running attempt. Else a wake-up, whose work is proportional to what changed: it
    observes the tasks ``changed`` names and settles the attempts it touched (and jobs being
    stopped). Either way capacity freed by what ended is used in the same pass: settle first,
    then admit and launch, then observe what was launched (so it shows where it stands at once)
    unless the backend started it, which launch saved RUNNING.

    ``take_more``: ``changed`` is the reconcile loop's claim (ref -> token, ``wakeup.claim``),
    and what was asked for while the pass observed and settled is taken in before it admits
    (``take_in_more``)."""
    report = PassReport()
    started = time.monotonic()
    with news.gathered() as gathered:
        named = observe(backend, report, changed)
        # A wake-up settles the jobs of the tasks it was told of even when observing them
        # changed nothing: a pass that died after saving their ends left them unsettled.
        scope = None if changed is None else named | report.touched_jobs
        settle(backend, report, scope)
        if changed is None:
            settle_orphans(backend, report)
        elif take_more and BOOK.crowded:
            assert isinstance(changed, Mapping)
            take_in_more(backend, report, changed)
        news.send_finished(gathered)  # not held behind the admissions and launches below
        send_stops(backend, report)
        settled = set(report.touched_jobs)
        admit(backend, report, full=changed is None)
        launched = launch(backend, report)
        if launched:
            observe(backend, report, launched)
        # What moved since the settle above, less the jobs that only started: they have
        # nothing to decide until one of their tasks ends (fails to launch, or ran already).
        moved = report.touched_jobs - settled
        unsettled = (moved - report.started_jobs) | (report.ended_jobs & moved)
        if unsettled:
            settle(backend, report, unsettled)
        gathered.jobs.update(report.touched_jobs)
        gathered.queues.update(report.touched_queues)
    if changed is None:
        cleanup(backend)
    wakeup.record_pass(time.monotonic() - started)
    return report


def take_in_more(backend: Backend, report: PassReport, claimed: Mapping[str, str]) -> None:
    """What was asked for since the pass claimed ``claimed``, claimed in turn and done as the
    start of a wake-up does it: the tasks recorded as changed observed and their jobs settled,
    with the jobs being stopped (what the pass does next, stops, admission and launches, serves
    the rest of what may have been asked). Its refs are forgotten with the pass's
    (``report.claimed``).

    Only while the last plan left jobs waiting (``BOOK.crowded``): then the room those tasks
    free is what the waiting jobs lack. Measured reason (``bench/e2e.py --no-slurm --jobs 300``,
    2 CPUs, taken in turn with the code before; docs/speed.md has every run): at one job per
    CPU a trivial task lasts about a third of a pass, so the task launched at the end of one
    pass ended while the next settled another and waited for a pass of its own. Taken in,
    1.6-1.85 jobs a pass instead of one, and 29.4 s against 32.3 s on average over nine rounds
    (faster in eight; the machine wandered from 22 to 36 s). Oversubscribed, with room to
    spare, taking them in regardless was slower (14.4-19.2 s against 12.6-16.4 s): the ends it
    split from the next pass's batch cost a second observe and settle.
    """
    more = wakeup.claim_more(claimed)
    if more is None:
        return
    report.claimed = more
    before = set(report.touched_jobs)
    named = observe(backend, report, more)
    settle(backend, report, named | (report.touched_jobs - before))
