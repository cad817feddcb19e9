"""Stop: a user's request (a waiting job at once, a running one through STOPPING), the pass
asking the backend to stop the tasks marked for it, and a stopped job closed once none of
its tasks is live."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
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
    finish_attempt(attempt, JobState.STOPPED, reason, None, tasks_live=False)
    if finish_job(job, JobState.STOPPED, reason):
        report.finished_jobs += 1
    report.touched_jobs.add(job.id)


def send_stops(backend: Backend, report: PassReport) -> None:
    """Ask the backend to stop the live tasks marked for it (one query for them all)."""
    marked = list(
        Task.objects.filter(state__in=LIVE_TASK_STATES, stop_requested=True)
        .order_by()
        .values_list("id", "backend_ref", "state", "attempt__job_id")
    )
    refs = [ref for _, ref, _, _ in marked if ref]
    if refs:
        backend.stop(refs)
    # Tasks that were never launched have nothing to stop: their jobs are settled next.
    unlaunched = {
        task_id: job_id
        for task_id, ref, state, job_id in marked
        if not ref and state == TaskState.WAITING
    }
    if unlaunched and Task.objects.filter(
        id__in=list(unlaunched), backend_ref="", state=TaskState.WAITING
    ).update(state=TaskState.STOPPED, completed_at=timezone.now()):
        report.touched_jobs.update(unlaunched.values())
