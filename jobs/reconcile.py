"""The reconcile pass: observe, settle, stop, admit, launch. Woken by events, and by beat.

One pass holds a Redis lock so that two workers never launch the same task twice; every
update inside it is also a compare-and-swap, so a pass that runs twice changes nothing.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import defaultdict
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta

import redis
import redis.backoff
import redis.retry
from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import BooleanField, ExpressionWrapper, Q, QuerySet
from django.utils import timezone

from clusters.admission import admit as admit_by_quota
from clusters.backends.base import (
    Backend,
    BackendUnavailable,
    Observation,
    Placement,
    SupportsCleanup,
    TaskLaunch,
    TaskPhase,
)
from clusters.quota import gpu_type_of
from jobs import lifecycle, news, wakeup
from jobs.access import is_admin
from jobs.completion import TaskView, decide
from jobs.models import Job, JobAttempt, JobEvent, Task
from jobs.protocol import render_registry_auth, secret_masker
from jobs.runtime import JobContext, bootstrap_script, task_environment, task_files
from jobs.runtime.context import context_for
from jobs.runtime.observe import exit_changes, mask_quoted, maskers_of
from jobs.states import LIVE_TASK_STATES, JobState, TaskState
from jobs.wakeup import FULL_KEY, QUEUED_KEY, WANTED_KEY, redis_client

log = logging.getLogger(__name__)
LOCK_NAME = "portal:reconcile"
ADMIT_BATCH = 100
CLEANUP_KEY = "portal:reconcile:cleanup"  # in the cache while the last cleanup is recent
CLEANUP_EVERY_SECONDS = 300
STANDING_KEY = "portal:reconcile:standing"  # in the cache for a while after standing was written
STANDING_EVERY_SECONDS = 1.0


@dataclass
class PassReport:
    admitted: int = 0
    launched: int = 0
    changed_tasks: int = 0
    finished_jobs: int = 0
    skipped: bool = False
    touched_jobs: set[int] = field(default_factory=set)
    touched_queues: set[str] = field(default_factory=set)  # VCs whose waiting jobs moved


MAX_PASSES = 5  # passes one task runs back to back while more is wanted
LAST_RUN_KEY = "portal:reconcile:last-run-at"  # when the last pass ended (Unix time)


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
            report = run_pass(backend, None if full else set(changes))
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
        redis_client(settings.REDIS_URL).set(LAST_RUN_KEY, time.time())
    except redis.exceptions.RedisError:
        log.warning("could not record the end of the reconcile pass", exc_info=True)
    return report


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


def seconds_since_last_pass() -> float | None:
    """How long ago the last reconcile pass ended (None: none since Redis started); raises
    ``RedisError`` when Redis does not answer."""
    ended = quick_client(settings.REDIS_URL).get(LAST_RUN_KEY)
    return None if ended is None else max(0.0, time.time() - float(ended))


def admit(backend: Backend, report: PassReport, full: bool = True) -> None:
    """Start waiting jobs as their virtual clusters' quotas allow (``clusters.admission``).

    Where each waiting job stands (its reason and queue position) is written by every full
    pass but by a wake-up at most once every ``STANDING_EVERY_SECONDS``: when jobs end one
    after another with a thousand waiting, every pass moves all their positions, and writing
    them (and telling their pages) each time cost more than the rest of the pass. A wake-up
    that leaves it asks for a pass once that second is over, so no standing stays stale. A
    wake-up with no job waiting skips admission (which reads every running job)."""
    if not full and not Job.objects.filter(state=JobState.WAITING).exists():
        return  # nothing to admit: spare a wake-up reading every running job
    write = full or cache.add(STANDING_KEY, 1, STANDING_EVERY_SECONDS)
    decided = admit_by_quota(backend, report, standing=write)
    if not write and decided.waiting:
        wakeup.request_pass_later(STANDING_EVERY_SECONDS)


def launch(backend: Backend, report: PassReport) -> list[str]:
    """Launch every task that is waiting and has not been handed to the backend yet; return
    the refs of those launched. A task the backend refuses fails with the reason; when the
    backend is unavailable (``BackendUnavailable``) the pass stops here and raises, leaving
    the task as it was."""
    pending = list(
        Task.objects.filter(state=TaskState.WAITING, backend_ref="", stop_requested=False)
        .select_related("attempt__job__owner", "attempt__job__virtual_cluster")
        .order_by("id")
    )
    if not pending:
        return []
    launched: list[str] = []
    attempt_ids = {t.attempt_id for t in pending}
    placements: dict[int, dict[tuple[str, int], Placement]] = defaultdict(dict)
    for row in Task.objects.filter(attempt_id__in=attempt_ids).values(
        "attempt_id", "role", "index", "address", "ports"
    ):
        placements[row["attempt_id"]][(row["role"], row["index"])] = Placement(
            row["address"], row["ports"]
        )
    for task in pending:
        job = task.attempt.job
        try:
            ctx = context_for(job, backend.name)  # ssh keys, storages, barrier timeout
            ref = launch_one(backend, task, ctx, placements[task.attempt_id])
        except BackendUnavailable:
            # An outage or a 429/5xx storm outlasting the retries is no failure of the task:
            # it stays WAITING and unlaunched for a later pass, and this pass fails (logged by
            # its caller) without changing any job.
            log.warning("the backend is unavailable; %s and the rest wait for a later pass", task)
            raise
        except Exception as exc:  # one task that cannot start must not stop the pass
            log.exception("could not launch %s", task)
            Task.objects.filter(id=task.id, state=TaskState.WAITING, backend_ref="").update(
                state=TaskState.FAILED,
                diagnostics=secret_masker(job.protocol).text(f"could not start: {exc}"),
                completed_at=timezone.now(),
            )
            report.touched_jobs.add(job.id)
            continue
        if Task.objects.filter(id=task.id, backend_ref="").update(backend_ref=ref):
            launched.append(ref)
        report.launched += 1
        report.touched_jobs.add(job.id)
    return launched


def launch_one(
    backend: Backend, task: Task, ctx: JobContext, placements: dict[tuple[str, int], Placement]
) -> str:
    job = task.attempt.job
    env = task_environment(ctx, placements, task.role, task.index)
    spec = job.protocol["taskRoles"][task.role]
    resources = spec["resourcePerInstance"]
    return backend.launch(
        TaskLaunch(
            attempt_key=task.attempt.key,
            role=task.role,
            index=task.index,
            retry=task.retries,
            script=bootstrap_script(ctx, task.role, env),
            env=env,
            placement=placements[(task.role, task.index)],
            cpu=resources["cpu"],
            memory_mb=resources["memoryMB"],
            gpu=resources["gpu"],
            image=image_of(job.protocol, task.role),
            shm_mb=spec.get("extraContainerOptions", {}).get("shmMB", 64),
            gpu_type=gpu_type_of(job.protocol, task.role),
            pull_secret=render_registry_auth(job.protocol, task.role),
            files=task_files(ctx),  # secrets (the job's SSH key) out of the script
            storages=list(ctx.storage_mounts),
            debug_keep_hours=ctx.debug_keep_hours,
            owner_id=job.owner_id,
            owner_is_admin=is_admin(job.owner),
        )
    )


def image_of(protocol: dict[str, object], role: str) -> str:
    roles = protocol["taskRoles"]
    assert isinstance(roles, dict)
    name = roles[role].get("dockerImage")
    prerequisites = protocol.get("prerequisites") or []
    assert isinstance(prerequisites, list)
    for item in prerequisites:
        if item.get("name") == name and item.get("type") == "dockerimage":
            return str(item.get("uri", ""))
    return ""


@dataclass(slots=True)
class TaskRow:
    """What observe() and settle() read of a task: plain values, not model instances (a pass
    reads every live task, and building 10,000 models costs more than the rest of it)."""

    id: int
    attempt_id: int
    job_id: int
    attempt_number: int
    role: str
    index: int
    state: str
    backend_ref: str
    ip: str
    node: str
    exit_code: int | None
    diagnostics: str
    retries: int
    stop_requested: bool
    started: bool  # started_at is set (not read itself: parsing 20,000 datetimes a pass costs)


def task_rows(tasks: QuerySet[Task]) -> list[TaskRow]:
    started = ExpressionWrapper(Q(started_at__isnull=False), output_field=BooleanField())
    return [
        TaskRow(*values)
        for values in tasks.annotate(started=started).values_list(
            "id", "attempt_id", "attempt__job_id", "attempt__number", "role", "index", "state",
            "backend_ref", "ip", "node", "exit_code", "diagnostics", "retries",
            "stop_requested", "started",
        )
    ]  # fmt: skip


def observe(backend: Backend, report: PassReport, refs: Collection[str] | None = None) -> None:
    """One backend call for every live task (or only those of ``refs``), then the changes
    saved in a few queries."""
    live_tasks = Task.objects.filter(state__in=LIVE_TASK_STATES).exclude(backend_ref="")
    if refs is not None:
        if not refs:
            return
        live_tasks = live_tasks.filter(backend_ref__in=list(refs))
    live = task_rows(live_tasks)
    if not live:
        return
    seen = backend.observe([t.backend_ref for t in live])
    changed: list[tuple[TaskRow, dict[str, object]]] = []
    for task in live:
        obs = seen.get(task.backend_ref) or Observation(task.backend_ref, TaskPhase.GONE)
        changes = changes_for(task, obs)
        if changes:
            changed.append((task, changes))
    # A task that ends gets the exit spec's phrase and reason, read from its log; what is
    # stored of its output has its job's secrets masked (one query for the jobs' protocols).
    maskers = maskers_of(changed)
    for task, changes in changed:
        masker = maskers.get(task.job_id)
        if masker is not None:
            changes.update(
                exit_changes(backend, task.backend_ref, changes, task.stop_requested, masker)
            )
            mask_quoted(changes, masker)
    if changed:
        save_changes(changed, report)


def save_changes(changed: list[tuple[TaskRow, dict[str, object]]], report: PassReport) -> None:
    """A compare-and-swap for many tasks in a constant number of queries: lock the rows, keep
    the changes of the tasks still in the state and on the backend ref they were observed in
    (a Stop or another pass may have moved them since), write them grouped by the fields they
    change, and record each change of state as an event."""
    with transaction.atomic():
        current = {
            row[0]: row[1:]
            for row in Task.objects.select_for_update()
            .filter(id__in=[task.id for task, _ in changed])
            .values_list("id", "state", "backend_ref")
        }
        kept = [(t, c) for t, c in changed if current.get(t.id) == (t.state, t.backend_ref)]
        groups: dict[tuple[str, ...], list[Task]] = defaultdict(list)
        for task, changes in kept:
            groups[tuple(sorted(changes))].append(Task(id=task.id, **changes))
        for fields, rows in groups.items():
            Task.objects.bulk_update(rows, fields, batch_size=1000)
        JobEvent.objects.bulk_create(
            [
                JobEvent(
                    job_id=task.job_id,
                    kind="task",
                    message=f"{task.role}-{task.index} {str(changes['state']).lower()}"
                    + (f": {changes['diagnostics']}" if changes.get("diagnostics") else ""),
                    attempt_number=task.attempt_number,
                    task=f"{task.role}-{task.index}",
                )
                for task, changes in kept
                if "state" in changes and changes["state"] != task.state
            ]
        )
    report.changed_tasks += len(kept)
    report.touched_jobs.update(task.job_id for task, _ in kept)


def changes_for(task: TaskRow, obs: Observation) -> dict[str, object]:
    """The fields of ``task`` that ``obs`` changes (empty when nothing does)."""
    now = timezone.now()
    new: dict[str, object] = {}
    if obs.phase == TaskPhase.PENDING:
        if obs.diagnostics != task.diagnostics:
            new["diagnostics"] = obs.diagnostics
    elif obs.phase == TaskPhase.RUNNING:
        if task.state != TaskState.RUNNING:
            new.update(state=TaskState.RUNNING, started_at=obs.started_at or now, diagnostics="")
        if obs.ip and obs.ip != task.ip:
            new["ip"] = obs.ip
        if obs.node and obs.node != task.node:
            new["node"] = obs.node
    else:
        if obs.phase == TaskPhase.SUCCEEDED:
            state = TaskState.SUCCEEDED
        elif task.stop_requested:
            state = TaskState.STOPPED
        else:
            state = TaskState.FAILED
        diagnostics = obs.diagnostics
        if obs.phase == TaskPhase.GONE and not diagnostics:
            diagnostics = "stopped" if task.stop_requested else "the backend lost the task"
        new.update(
            state=state,
            exit_code=obs.exit_code,
            diagnostics=diagnostics,
            completed_at=obs.finished_at or now,
        )
        if not task.started:
            new["started_at"] = obs.started_at
        if obs.node:
            new["node"] = obs.node
    return new


def settle(backend: Backend, report: PassReport, job_ids: Collection[int] | None = None) -> None:
    """Apply retries and completion policies to running attempts (those of every job, or of
    ``job_ids`` and of the jobs being stopped); close stopped jobs."""
    running = JobAttempt.objects.filter(state=JobState.RUNNING)
    if job_ids is not None:  # two index lookups (an OR across the join would scan attempts)
        stopping = Job.objects.filter(state=JobState.STOPPING).values_list("id", flat=True)
        running = running.filter(job_id__in={*job_ids, *stopping})
    attempts = list(
        running.select_related("job__owner").defer(
            "job__submitted_text", "job__resources", "job__tags"
        )  # not needed: not read
    )
    if not attempts:
        return
    tasks_by_attempt: dict[int, list[TaskRow]] = defaultdict(list)
    for task in task_rows(Task.objects.filter(attempt__in=attempts).order_by("id")):
        tasks_by_attempt[task.attempt_id].append(task)
    for attempt in attempts:
        job = attempt.job
        tasks = tasks_by_attempt[attempt.id]
        if job.state == JobState.STOPPING:
            settle_stopping(job, attempt, tasks, report)
            continue
        if job.state != JobState.RUNNING:
            lifecycle.finish_attempt(attempt, job.state, job.reason, job.exit_code)
            continue
        retry_tasks(job, attempt, tasks)
        verdict = decide(
            job.protocol,
            (TaskView(t.role, t.index, t.state, t.exit_code, t.diagnostics) for t in tasks),
        )
        if verdict is None:
            continue
        if not lifecycle.finish_attempt(attempt, verdict.state, verdict.reason, verdict.exit_code):
            continue  # another pass finished it (and tells the job's pages)
        report.touched_jobs.add(job.id)
        if verdict.state == TaskState.FAILED and lifecycle.retry_job(job, attempt, backend):
            continue
        if lifecycle.finish_job(job, verdict.state, verdict.reason, verdict.exit_code):
            report.finished_jobs += 1


def retry_tasks(job: Job, attempt: JobAttempt, tasks: list[TaskRow]) -> None:
    """Send failed tasks with retries left back to WAITING; they launch in the next pass."""
    for task in tasks:
        allowed = job.protocol["taskRoles"][task.role].get("taskRetryCount", 0)
        if task.state != TaskState.FAILED or task.retries >= allowed or task.stop_requested:
            continue
        moved = Task.objects.filter(
            id=task.id, state=TaskState.FAILED, retries=task.retries
        ).update(
            state=TaskState.WAITING, retries=task.retries + 1, backend_ref="", completed_at=None
        )
        if moved:
            lifecycle.record(
                job.id,
                "task",
                f"{task.role}-{task.index} retry {task.retries + 1} of {allowed} "
                f"after: {task.diagnostics or f'exit code {task.exit_code}'}",
                attempt.number,
                f"{task.role}-{task.index}",
            )
            task.state = TaskState.WAITING
            task.retries += 1


def settle_stopping(
    job: Job, attempt: JobAttempt, tasks: list[TaskRow], report: PassReport
) -> None:
    if any(t.state in LIVE_TASK_STATES for t in tasks):
        return
    reason = job.reason.replace("stopping: requested", "stopped", 1)
    lifecycle.finish_attempt(attempt, JobState.STOPPED, reason, None)
    if lifecycle.finish_job(job, JobState.STOPPED, reason):
        report.finished_jobs += 1
    report.touched_jobs.add(job.id)


def settle_orphans(backend: Backend, report: PassReport) -> None:
    """Jobs left without a running attempt by a pass that died half-way: finish what it began."""
    orphans = Job.objects.filter(state__in=[JobState.RUNNING, JobState.STOPPING]).exclude(
        attempts__state=JobState.RUNNING
    )
    for job in orphans.filter(attempts__isnull=False).distinct():
        last = job.attempts.order_by("-number").first()
        assert last is not None
        if job.state == JobState.STOPPING:
            live = task_rows(Task.objects.filter(attempt__job=job, state__in=LIVE_TASK_STATES))
            settle_stopping(job, last, live, report)
        elif last.state == JobState.FAILED and lifecycle.retry_job(job, last, backend):
            continue
        elif lifecycle.finish_job(job, last.state, last.reason, last.exit_code):
            report.finished_jobs += 1
        report.touched_jobs.add(job.id)


def send_stops(backend: Backend, report: PassReport) -> None:
    refs = list(
        Task.objects.filter(state__in=LIVE_TASK_STATES, stop_requested=True)
        .exclude(backend_ref="")
        .values_list("backend_ref", flat=True)
    )
    if refs:
        backend.stop(refs)
    # Tasks that were never launched have nothing to stop: their jobs are settled next.
    unlaunched = Task.objects.filter(
        Q(backend_ref=""), state=TaskState.WAITING, stop_requested=True
    )
    job_ids = set(unlaunched.values_list("attempt__job_id", flat=True))
    if job_ids and unlaunched.update(state=TaskState.STOPPED, completed_at=timezone.now()):
        report.touched_jobs.update(job_ids)


# -- cleanup: what the backend still holds of attempts nobody needs -------------------------------


def cleanup(backend: Backend, force: bool = False) -> list[str] | None:
    """At most every ``CLEANUP_EVERY_SECONDS`` (tracked in the cache; ``force`` skips that), ask
    a backend that can (``SupportsCleanup``) to delete what it holds of attempts that are neither
    running nor finished less than ``<BACKEND>_KEEP_FINISHED_HOURS`` ago (so recent logs stay
    readable); attempts of unknown jobs go too. The attempt keys it cleaned, or None when it did
    not run. A failing cleanup is logged and tried again next time, never failing the pass."""
    if not isinstance(backend, SupportsCleanup):
        return None
    try:
        if not force and not cache.add(
            CLEANUP_KEY, timezone.now().isoformat(), CLEANUP_EVERY_SECONDS
        ):
            return None
        removed = backend.cleanup(kept_attempt_keys(keep_finished_hours(backend)))
    except Exception:
        log.exception("cleanup of finished attempts failed; the next one tries again")
        return None
    if removed:
        log.info("cleaned up %d attempt(s): %s", len(removed), ", ".join(removed[:20]))
    return removed


def keep_finished_hours(backend: Backend) -> float:
    if backend.name == "kubernetes":
        return float(settings.K8S_KEEP_FINISHED_HOURS)
    return float(settings.LOCAL_KEEP_FINISHED_HOURS)


def kept_attempt_keys(hours: float) -> set[str]:
    """Keys of attempts running, with a live task, or finished less than ``hours`` ago."""
    cutoff = timezone.now() - timedelta(hours=hours)
    live_tasks = Task.objects.filter(state__in=LIVE_TASK_STATES).values("attempt_id")
    return set(
        JobAttempt.objects.filter(
            Q(state=JobState.RUNNING)
            | Q(completed_at__isnull=True)
            | Q(completed_at__gte=cutoff)
            | Q(id__in=live_tasks)
        ).values_list("key", flat=True)
    )
