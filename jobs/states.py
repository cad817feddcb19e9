"""Job and task states, and the transitions allowed between them (OpenPAI's names)."""

from __future__ import annotations

from django.db import models


class JobState(models.TextChoices):
    WAITING = "WAITING"
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"


class TaskState(models.TextChoices):
    WAITING = "WAITING"  # created; not launched, or launched and not running yet
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"


JOB_TRANSITIONS: dict[str, frozenset[str]] = {
    # FAILED from WAITING: a job the backend cannot place (lifecycle.start_waiting).
    JobState.WAITING: frozenset({JobState.RUNNING, JobState.STOPPED, JobState.FAILED}),
    JobState.RUNNING: frozenset(
        {JobState.STOPPING, JobState.SUCCEEDED, JobState.FAILED, JobState.WAITING}
    ),
    JobState.STOPPING: frozenset({JobState.STOPPED}),
    JobState.SUCCEEDED: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.STOPPED: frozenset(),
}

LIVE_JOB_STATES = (JobState.WAITING, JobState.RUNNING, JobState.STOPPING)
FINAL_JOB_STATES = (JobState.SUCCEEDED, JobState.FAILED, JobState.STOPPED)
LIVE_TASK_STATES = (TaskState.WAITING, TaskState.RUNNING)


def can_move_job(old: str, new: str) -> bool:
    return new in JOB_TRANSITIONS[old]
