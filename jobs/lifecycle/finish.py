"""Closing an attempt and a job: the end every step (settle, stop, preempt, a launch that
fails) comes to. Each is a compare-and-swap: False when someone else closed it first."""

from __future__ import annotations

from django.utils import timezone

from jobs import news
from jobs.lifecycle.events import record
from jobs.models import Job, JobAttempt, Task
from jobs.states import FINAL_JOB_STATES, LIVE_TASK_STATES, JobState, can_move_job


def finish_attempt(
    attempt: JobAttempt,
    state: str,
    reason: str,
    exit_code: int | None,
    tasks_live: bool = True,
) -> bool:
    """Close an attempt: ask its live tasks to stop (``tasks_live`` False: the caller has read
    them all ended, or asks them itself). False when it was already closed."""
    now = timezone.now()
    closed = JobAttempt.objects.filter(id=attempt.id, state=JobState.RUNNING).update(
        state=state, reason=reason, exit_code=exit_code, completed_at=now
    )
    if closed:
        if tasks_live:
            live = Task.objects.filter(attempt=attempt, state__in=LIVE_TASK_STATES)
            live.update(stop_requested=True)
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
        news.after_commit(job.id, finished=state in FINAL_JOB_STATES)
    return bool(moved)
