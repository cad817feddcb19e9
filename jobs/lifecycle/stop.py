"""Stop: a user's request (a waiting job at once, a running one through STOPPING), the pass
asking the backend to stop the tasks marked for it, and a stopped job closed once none of
its tasks is live."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from backends.base import Backend
from jobs import news, wakeup
from jobs.lifecycle.events import record
from jobs.lifecycle.finish import finish_attempt, finish_job
from jobs.lifecycle.observe import TaskRow
from jobs.lifecycle.report import PassReport
from jobs.models import Job, JobAttempt, Task
from jobs.states import LIVE_TASK_STATES, JobState, TaskState


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
    news.after_commit(job.id)
    transaction.on_commit(wakeup.request_pass, robust=True)  # a pass sends the stops
    return True


def settle_stopping(
    job: Job, attempt: JobAttempt, tasks: list[TaskRow], report: PassReport
) -> None:
    if any(t.state in LIVE_TASK_STATES for t in tasks):
        return
    reason = job.reason.replace("stopping: requested", "stopped", 1)
    finish_attempt(attempt, JobState.STOPPED, reason, None)
    if finish_job(job, JobState.STOPPED, reason):
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
