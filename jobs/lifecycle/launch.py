"""Launch, in two moves: an attempt starts (its tasks placed by the backend and saved WAITING,
``start_waiting`` for admitted jobs, ``start_attempt`` for a retry), then the pass hands each
waiting task to the backend (``launch``) with its script and environment."""

from __future__ import annotations

import hashlib
import logging
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.db.models import Case, OuterRef, Subquery, Value, When
from django.db.models.functions import Coalesce
from django.utils import timezone

from backends.base import (
    Backend,
    BackendUnavailable,
    Placement,
    StartsOnLaunch,
    TaskLaunch,
    TaskShape,
)
from clusters.demand import gpu_type_of
from jobs import news
from jobs.access import is_admin
from jobs.lifecycle.finish import finish_job
from jobs.lifecycle.observe import task_event
from jobs.lifecycle.report import PassReport
from jobs.models import Job, JobAttempt, JobEvent, Task
from jobs.plugins import uses_ssh
from jobs.runtime import JobContext, bootstrap_script, task_environment, task_files
from jobs.runtime.context import context_for
from jobs.runtime.env import container_id
from jobs.states import JobState, TaskState
from protocol import render_registry_auth, secret_masker

log = logging.getLogger(__name__)
AttemptRows = tuple[JobAttempt, list[Task]]


# -- starting an attempt: its tasks placed and saved ----------------------------------------------


def port_counts(protocol: dict[str, Any], role: str) -> dict[str, int]:
    """A role's ports by label; with the ssh plugin on, one ``ssh`` port where the role
    declares none, as OpenPAI's rest-server gives every task (its Horovod example declares no
    port and reaches its workers over ssh)."""
    spec = protocol["taskRoles"][role]
    counts: dict[str, int] = dict(spec["resourcePerInstance"].get("ports", {}))
    if "ssh" not in counts and uses_ssh(protocol, role):
        counts["ssh"] = 1
    return counts


def shapes(protocol: dict[str, Any]) -> list[TaskShape]:
    return [
        TaskShape(
            role=role,
            index=index,
            cpu=spec["resourcePerInstance"]["cpu"],
            memory_mb=spec["resourcePerInstance"]["memoryMB"],
            gpu=spec["resourcePerInstance"]["gpu"],
            port_counts=port_counts(protocol, role),
        )
        for role, spec in protocol["taskRoles"].items()
        for index in range(spec["instances"])
    ]


def attempt_key(job: Job, number: int) -> str:
    """``job<id>-<tag>-a<number>``, which names the attempt's tasks on the cluster (their
    directories, pods, Slurm jobs). The tag comes from the job's creation time: a database
    started afresh gives its ids from 1 again, and its jobs must not take the tasks an old
    database's jobs left there (the same key and script read as "already launched")."""
    created = f"{job.id}:{job.created_at.astimezone(UTC):%Y%m%d%H%M%S%f}"
    tag = hashlib.sha1(created.encode(), usedforsecurity=False).hexdigest()[:6]
    return f"job{job.id}-{tag}-a{number}"


def new_attempt(job: Job, number: int, backend: Backend, now: datetime) -> AttemptRows:
    """Attempt ``number`` of ``job`` with its tasks placed by the backend, not yet saved."""
    key = attempt_key(job, number)
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


def start_waiting(job_ids: list[int], backend: Backend, borrowing: set[int]) -> list[Job]:
    """Start the next attempt of each waiting job of ``job_ids``, in that order (its first, or
    the one after a preemption), in a constant number of queries; those in ``borrowing`` run
    on idle capacity, preemptible. Jobs another worker took meanwhile are left out."""
    if not job_ids:
        return []
    now = timezone.now()
    with transaction.atomic():
        # Locked and read in one query, each with the number of its last attempt (a
        # subquery: PostgreSQL allows no GROUP BY beside FOR UPDATE).
        last = JobAttempt.objects.filter(job=OuterRef("pk")).order_by("-number")
        locked = {
            job.id: job
            for job in Job.objects.select_for_update(skip_locked=True)
            .filter(id__in=job_ids, state=JobState.WAITING)
            .defer("submitted_text", "ssh_private_key", "ssh_public_key")
            .annotate(last=Subquery(last.values("number")[:1]))
        }
        chosen = [locked[job_id] for job_id in job_ids if job_id in locked]
        if not chosen:
            return []
        rows, unplaced = [], []
        for job in chosen:
            try:
                number = -1 if job.last is None else job.last  # type: ignore[attr-defined]
                rows.append(new_attempt(job, number + 1, backend, now))
            except BackendUnavailable:
                raise  # no fault of the job: the pass fails and every job waits for the next
            except Exception as exc:  # one job the backend cannot place fails alone
                log.exception("could not place %s", job)
                unplaced.append((job, f"could not be placed: {exc}"))
        started = [attempt.job for attempt, _ in rows]  # in the order of ``job_ids``
        Job.objects.filter(id__in=[job.id for job in started]).update(
            state=JobState.RUNNING,
            reason="running",
            updated_at=now,
            started_at=Coalesce("started_at", Value(now)),  # its first start, kept on a retry
            queue_position=None,
            # a Case, not a bare Q: Django drops an UPDATE whose Q(id__in=[]) matches nothing
            borrowing=Case(When(id__in=borrowing, then=Value(True)), default=Value(False)),
        )
        save_attempts(rows)
        for job, reason in unplaced:
            finish_job(job, JobState.FAILED, reason)
    for job in started:
        news.after_commit(job.id)
    return started


# -- launching: each waiting task handed to the backend -------------------------------------------


def launch(backend: Backend, report: PassReport) -> list[str]:
    """Launch every task that is waiting and has not been handed to the backend yet; return
    the refs of those launched that the pass is to observe: none where the backend starts
    them (``StartsOnLaunch``), which are saved RUNNING here, with their ref. A task the backend
    refuses fails with the reason; when the backend is unavailable (``BackendUnavailable``)
    the pass stops here and raises, leaving the task as it was."""
    pending = list(
        Task.objects.filter(state=TaskState.WAITING, backend_ref="", stop_requested=False)
        .select_related("attempt__job__owner", "attempt__job__virtual_cluster")
        .order_by("id")
    )
    if not pending:
        return []
    launched: list[str] = []
    # Where the backend's tasks run once launched (``StartsOnLaunch``): saved so, not observed.
    started_on = backend.launch_node if isinstance(backend, StartsOnLaunch) else None
    running: list[JobEvent] = []  # the events of the tasks saved RUNNING at their launch
    placements = peer_placements(pending)
    try:
        for task in pending:
            job = task.attempt.job
            try:
                ctx = context_for(job, backend.name)  # ssh keys, storages, barrier timeout
                ref = launch_one(backend, task, ctx, placements[task.attempt_id])
            except BackendUnavailable:
                # An outage or a 429/5xx storm outlasting the retries is no failure of the task:
                # it stays WAITING and unlaunched for a later pass, and this pass fails (logged by
                # its caller) without changing any job.
                log.warning(
                    "the backend is unavailable; %s and the rest wait for a later pass", task
                )
                raise
            except Exception as exc:  # one task that cannot start must not stop the pass
                log.exception("could not launch %s", task)
                Task.objects.filter(id=task.id, state=TaskState.WAITING, backend_ref="").update(
                    state=TaskState.FAILED,
                    diagnostics=secret_masker(job.protocol).text(f"could not start: {exc}"),
                    completed_at=timezone.now(),
                )
                report.touched_jobs.add(job.id)
                report.ended_jobs.add(job.id)
                continue
            saved: dict[str, object] = {"backend_ref": ref}
            if started_on is not None:  # running now: one UPDATE, no observation
                saved.update(state=TaskState.RUNNING, started_at=timezone.now(), node=started_on)
            if Task.objects.filter(id=task.id, backend_ref="").update(**saved):
                if started_on is not None:
                    name = f"{task.role}-{task.index}"
                    running.append(task_event(job.id, task.attempt.number, name, TaskState.RUNNING))
                else:
                    launched.append(ref)
            report.launched += 1
            report.touched_jobs.add(job.id)
    finally:  # what was saved RUNNING keeps its event should a later launch raise
        JobEvent.objects.bulk_create(running)
    return launched


def peer_placements(pending: list[Task]) -> dict[int, dict[tuple[str, int], Placement]]:
    """Where every task of the attempts of ``pending`` is (its environment names its peers'):
    read from ``pending`` itself when it holds all of an attempt's tasks (a new attempt), else
    one query for the attempts of tasks retried beside their running peers."""
    placements: dict[int, dict[tuple[str, int], Placement]] = defaultdict(dict)
    for task in pending:
        placements[task.attempt_id][(task.role, task.index)] = Placement(task.address, task.ports)
    partial: set[int] = set()
    for attempt_id, job in {task.attempt_id: task.attempt.job for task in pending}.items():
        instances = sum(role["instances"] for role in job.protocol["taskRoles"].values())
        if len(placements[attempt_id]) < instances:  # a retry beside running peers
            partial.add(attempt_id)
    for row in Task.objects.filter(attempt_id__in=partial).values(
        "attempt_id", "role", "index", "address", "ports"
    ):
        placements[row["attempt_id"]][(row["role"], row["index"])] = Placement(
            row["address"], row["ports"]
        )
    return placements


def launch_one(
    backend: Backend, task: Task, ctx: JobContext, placements: dict[tuple[str, int], Placement]
) -> str:
    job = task.attempt.job
    container = container_id(task.attempt.key, task.role, task.index, task.retries)
    env = task_environment(ctx, placements, task.role, task.index, container)
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
