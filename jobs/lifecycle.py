"""Every change of a job's state happens here: submit, start an attempt, finish it, stop.

Each step is a compare-and-swap update (``filter(id=..., state=old).update(...)``): when it
changes no row, someone else got there first and the step does nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from clusters.backends.base import Backend, BackendUnavailable, TaskShape
from clusters.models import VirtualCluster
from jobs import news
from jobs.models import Job, JobAttempt, JobEvent, Task
from jobs.plugins import storage
from jobs.protocol import SECRET_MASK, ProtocolError, load_job, masks_left
from jobs.states import LIVE_TASK_STATES, JobState, can_move_job

log = logging.getLogger(__name__)
AttemptRows = tuple[JobAttempt, list[Task]]


@dataclass
class SubmitError(Exception):
    """A submission refused; ``status`` is the HTTP status that says why."""

    status: int
    errors: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return "\n".join(self.errors)


def submit(
    user: AbstractBaseUser,
    text: str | bytes,
    *,
    virtual_cluster: str | None = None,
    deployment: str | None = None,
) -> Job:
    """Check a job file and queue it; the one way every form and API submits."""
    size = len(text.encode() if isinstance(text, str) else text)
    if size > settings.JOB_MAX_BYTES:
        raise SubmitError(
            400, [f"job file: {size} bytes, more than the limit of {settings.JOB_MAX_BYTES}"]
        )
    try:
        loaded = load_job(text)
    except ProtocolError as exc:
        raise SubmitError(400, issue_lines(exc)) from None
    protocol = loaded.job
    if masks_left(protocol):
        raise SubmitError(400, [masked_line(path) for path in masks_left(protocol)])
    too_many = port_problems(protocol)
    if too_many:
        raise SubmitError(400, too_many)
    defaults = protocol.setdefault("defaults", {})
    if deployment:
        names = [d.get("name") for d in protocol.get("deployments", [])]
        if deployment not in names:
            raise SubmitError(400, [f"deployment: no deployment named {deployment!r} in the job"])
        defaults["deployment"] = deployment
    vc = admission_check(user, protocol, virtual_cluster or defaults.get("virtualCluster"))
    storage.check_access(user, protocol)  # teamwise_storage: 400 unknown / 403 not allowed
    roles = protocol["taskRoles"].values()
    text_value = text if isinstance(text, str) else text.decode("utf-8", "replace")
    job = Job(
        owner=user,
        name=protocol["name"],
        virtual_cluster=vc,
        submitted_text=text_value,
        source_format=loaded.source_format,
        protocol=protocol,
        task_count=sum(r["instances"] for r in roles),
        gpu_count=sum(r["instances"] * r["resourcePerInstance"]["gpu"] for r in roles),
        reason="waiting to be admitted",
        **admission_fields(protocol),
    )
    try:
        with transaction.atomic():
            job.save()
            record(job.id, "submitted", f"submitted by {user.get_username()} to '{vc.name}'")
            for warning in loaded.warnings:
                record(job.id, "warning", warning)
    except IntegrityError:
        raise SubmitError(
            409, [f"name: you already have a job named {protocol['name']!r}"]
        ) from None
    news.after_commit(job.id, reconcile=True, new=True)
    return job


def port_problems(protocol: dict[str, Any]) -> list[str]:
    """Roles asking for more ports per task than ``JOB_MAX_PORTS_PER_TASK``: each port is a
    socket held while the job is placed, and a million of them failed every placement."""
    limit = settings.JOB_MAX_PORTS_PER_TASK
    problems = []
    for role, spec in protocol["taskRoles"].items():
        ports = spec["resourcePerInstance"].get("ports") or {}
        total = sum(ports.values())
        if total > limit:
            problems.append(
                f"taskRoles.{role}.resourcePerInstance.ports: {total} ports per task in "
                f"{len(ports)} label(s), more than the limit of {limit}"
            )
    return problems


def admission_check(
    user: AbstractBaseUser, protocol: dict[str, Any], vc_name: str | None
) -> VirtualCluster:
    """The virtual cluster the job goes to, when ``user`` may use it and the job could fit."""
    from clusters.admission import submit_check

    try:
        return submit_check(user, protocol, vc_name)
    except PermissionError as exc:
        raise SubmitError(403, [str(exc)]) from None
    except ValueError as exc:
        raise SubmitError(400, [str(exc)]) from None


def admission_fields(protocol: dict[str, Any]) -> dict[str, Any]:
    from clusters.admission import job_fields

    return job_fields(protocol)


def masked_line(path: str) -> str:
    return (
        f"{path}: still {SECRET_MASK}, the mask a clone or an export shows in place of the "
        "secret: enter the secret again"
    )


def issue_lines(exc: ProtocolError) -> list[str]:
    return [f"{i.path}: {i.message}" if i.path else i.message for i in exc.issues]


def record(
    job_id: int, kind: str, message: str, attempt: int | None = None, task: str = ""
) -> None:
    JobEvent.objects.create(
        job_id=job_id, kind=kind, message=message, attempt_number=attempt, task=task
    )


def shapes(protocol: dict[str, Any]) -> list[TaskShape]:
    return [
        TaskShape(
            role=role,
            index=index,
            cpu=spec["resourcePerInstance"]["cpu"],
            memory_mb=spec["resourcePerInstance"]["memoryMB"],
            gpu=spec["resourcePerInstance"]["gpu"],
            port_counts=dict(spec["resourcePerInstance"].get("ports", {})),
        )
        for role, spec in protocol["taskRoles"].items()
        for index in range(spec["instances"])
    ]


def new_attempt(job: Job, number: int, backend: Backend, now: datetime) -> AttemptRows:
    """Attempt ``number`` of ``job`` with its tasks placed by the backend, not yet saved."""
    key = f"job{job.id}-a{number}"
    task_shapes = shapes(job.protocol)
    placements = backend.place(key, task_shapes)
    attempt = JobAttempt(job=job, number=number, key=key, created_at=now)
    tasks = [
        Task(
            attempt=attempt,
            role=shape.role,
            index=shape.index,
            address=placement.ip,
            ip=placement.ip,
            ports=placement.ports,
            created_at=now,
        )
        for shape, placement in zip(task_shapes, placements, strict=True)
    ]
    return attempt, tasks


def save_attempts(rows: list[AttemptRows]) -> None:
    """Save new attempts, their tasks and an event each: three queries for any number."""
    JobAttempt.objects.bulk_create([attempt for attempt, _ in rows])
    for attempt, tasks in rows:
        for task in tasks:
            task.attempt = attempt  # now that the attempt has its id
    Task.objects.bulk_create([task for _, tasks in rows for task in tasks], batch_size=2000)
    JobEvent.objects.bulk_create(
        JobEvent(
            job_id=attempt.job_id,
            kind="attempt",
            message=f"attempt {attempt.number} started with {len(tasks)} tasks",
            attempt_number=attempt.number,
        )
        for attempt, tasks in rows
    )


def start_attempt(job: Job, backend: Backend, number: int) -> JobAttempt | None:
    """Start attempt ``number`` of a job: a retry keeps it RUNNING (``start_waiting`` starts
    waiting jobs). The reconcile loop launches the tasks."""
    now = timezone.now()
    with transaction.atomic():
        if JobAttempt.objects.filter(job=job, number=number).exists():
            return None
        rows = [new_attempt(job, number, backend, now)]
        save_attempts(rows)
    news.after_commit(job.id)
    return rows[0][0]


def start_waiting(jobs: list[Job], backend: Backend, **fields: Any) -> list[Job]:
    """Start the next attempt of each waiting job (its first, or the one after a preemption)
    in a constant number of queries; ``fields`` are set on the started jobs. Jobs another
    worker took meanwhile are left out of the result."""
    if not jobs:
        return []
    now = timezone.now()
    with transaction.atomic():
        waiting = set(
            Job.objects.select_for_update(skip_locked=True)
            .filter(id__in=[job.id for job in jobs], state=JobState.WAITING)
            .values_list("id", flat=True)
        )
        chosen = [job for job in jobs if job.id in waiting]
        if not chosen:
            return []
        last = dict(
            JobAttempt.objects.filter(job_id__in=waiting)
            .values("job_id")
            .annotate(last=Max("number"))
            .values_list("job_id", "last")
        )
        rows, unplaced = [], []
        for job in chosen:
            try:
                rows.append(new_attempt(job, last.get(job.id, -1) + 1, backend, now))
            except BackendUnavailable:
                raise  # no fault of the job: the pass fails and every job waits for the next
            except Exception as exc:  # one job the backend cannot place fails alone
                log.exception("could not place %s", job)
                unplaced.append((job, f"could not be placed: {exc}"))
        started_ids = waiting - {job.id for job, _ in unplaced}
        Job.objects.filter(id__in=started_ids).update(
            state=JobState.RUNNING, reason="running", updated_at=now, **fields
        )
        Job.objects.filter(id__in=started_ids, started_at=None).update(started_at=now)
        save_attempts(rows)
        for job, reason in unplaced:
            finish_job(job, JobState.FAILED, reason)
    started = [job for job in chosen if job.id in started_ids]
    for job in started:
        news.after_commit(job.id)
    return started


def finish_attempt(attempt: JobAttempt, state: str, reason: str, exit_code: int | None) -> bool:
    """Close an attempt: ask its live tasks to stop. False when it was already closed."""
    now = timezone.now()
    closed = JobAttempt.objects.filter(id=attempt.id, state=JobState.RUNNING).update(
        state=state, reason=reason, exit_code=exit_code, completed_at=now
    )
    if closed:
        Task.objects.filter(attempt=attempt, state__in=LIVE_TASK_STATES).update(stop_requested=True)
        record(
            attempt.job_id,
            "attempt",
            f"attempt {attempt.number} {state.lower()}: {reason}",
            attempt.number,
        )
    return bool(closed)


def finish_job(job: Job, state: str, reason: str, exit_code: int | None = None) -> bool:
    old = job.state
    if not can_move_job(old, state):
        return False
    moved = Job.objects.filter(id=job.id, state=old).update(
        state=state,
        reason=reason,
        exit_code=exit_code,
        completed_at=timezone.now(),
        updated_at=timezone.now(),
    )
    if moved:
        record(job.id, "state", f"{state.lower()}: {reason}")
        news.after_commit(job.id)
    return bool(moved)


def retry_job(job: Job, attempt: JobAttempt, backend: Backend) -> bool:
    """Start the next attempt when ``jobRetryCount`` allows; False when none is left."""
    allowed = int(job.protocol.get("jobRetryCount", 0))
    if job.retries >= allowed:
        return False
    moved = Job.objects.filter(id=job.id, state=JobState.RUNNING, retries=job.retries).update(
        retries=job.retries + 1, reason=f"retrying after attempt {attempt.number} failed"
    )
    if moved:
        job.retries += 1
        start_attempt(job, backend, attempt.number + 1)
    return True


def stop(job: Job, by: AbstractBaseUser) -> bool:
    """Stop a job: a waiting one at once, a running one through STOPPING."""
    who = by.get_username()
    with transaction.atomic():
        if Job.objects.filter(id=job.id, state=JobState.WAITING).update(
            state=JobState.STOPPED,
            reason=f"stopped by {who} while waiting",
            completed_at=timezone.now(),
        ):
            record(job.id, "state", f"stopped by {who} while waiting")
        elif Job.objects.filter(id=job.id, state=JobState.RUNNING).update(
            state=JobState.STOPPING, reason=f"stopping: requested by {who}"
        ):
            record(job.id, "state", f"stop requested by {who}")
            Task.objects.filter(attempt__job=job, state__in=LIVE_TASK_STATES).update(
                stop_requested=True
            )
        else:
            return False
    news.after_commit(job.id, reconcile=True)
    return True
