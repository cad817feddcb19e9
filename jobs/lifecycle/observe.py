"""Observe: one backend call for the live tasks, their changes saved in a few queries.

Also the plain rows (``TaskRow``) that observing and settling read of each task."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass

from django.db import transaction
from django.db.models import BooleanField, ExpressionWrapper, Q, QuerySet
from django.utils import timezone

from backends.base import Backend, Observation, TaskPhase
from jobs.lifecycle import peers
from jobs.lifecycle.exits import exit_changes, mask_quoted, maskers_of
from jobs.lifecycle.report import PassReport
from jobs.models import JobEvent, Task
from jobs.states import LIVE_TASK_STATES, TaskState


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


def observe(backend: Backend, report: PassReport, refs: Collection[str] | None = None) -> set[int]:
    """One backend call for every live task (or only those of ``refs``), then the changes
    saved in a few queries. The jobs of the tasks ``refs`` names, live or not (none without
    ``refs``): a wake-up settles them."""
    if refs is None:
        live = task_rows(Task.objects.filter(state__in=LIVE_TASK_STATES).exclude(backend_ref=""))
        named = set[int]()
    elif refs:
        rows = task_rows(Task.objects.filter(backend_ref__in=list(refs)))
        live = [row for row in rows if row.state in LIVE_TASK_STATES]
        named = {row.job_id for row in rows}
    else:
        return set()
    if not live:
        return named
    seen = backend.observe([t.backend_ref for t in live])
    changed: list[tuple[TaskRow, dict[str, object]]] = []
    awaiting_peers: list[TaskRow] = []
    for task in live:
        obs = seen.get(task.backend_ref) or Observation(task.backend_ref, TaskPhase.GONE)
        changes = changes_for(task, obs)
        if changes:
            changed.append((task, changes))
        if obs.awaits_peers:
            awaiting_peers.append(task)
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
    peers.publish(backend, awaiting_peers)
    return named


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
            if len(rows) == 1:  # a plain UPDATE: bulk_update's CASE per field took 2 ms more
                Task.objects.filter(id=rows[0].id).update(
                    **{f: getattr(rows[0], f) for f in fields}
                )
            else:
                Task.objects.bulk_update(rows, fields, batch_size=1000)
        JobEvent.objects.bulk_create(
            [
                task_event(
                    task.job_id,
                    task.attempt_number,
                    f"{task.role}-{task.index}",
                    str(changes["state"]),
                    str(changes.get("diagnostics") or ""),
                )
                for task, changes in kept
                if "state" in changes and changes["state"] != task.state
            ]
        )
    report.changed_tasks += len(kept)
    report.touched_jobs.update(task.job_id for task, _ in kept)
    report.ended_jobs.update(
        task.job_id
        for task, changes in kept
        if changes.get("state", task.state) not in LIVE_TASK_STATES
    )


def task_event(
    job_id: int, attempt_number: int, task: str, state: str, diagnostics: str = ""
) -> JobEvent:
    """The job's event for one of its tasks entering ``state`` (not saved)."""
    message = f"{task} {state.lower()}" + (f": {diagnostics}" if diagnostics else "")
    return JobEvent(
        job_id=job_id, kind="task", message=message, attempt_number=attempt_number, task=task
    )


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
        if obs.awaits_peers and obs.ports is not None:
            # published by the task itself (Slurm): what its peers' environment is made of
            new.update(address=obs.ip, ports=obs.ports)
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
