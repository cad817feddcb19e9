"""Retries: a failed task with ``taskRetryCount`` left goes back to WAITING; a failed attempt
with ``jobRetryCount`` left makes way for the next attempt."""

from __future__ import annotations

from clusters.backends.base import Backend
from jobs.lifecycle.events import record
from jobs.lifecycle.launch import start_attempt
from jobs.lifecycle.observe import TaskRow
from jobs.models import Job, JobAttempt, Task
from jobs.states import JobState, TaskState


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
            record(
                job.id,
                "task",
                f"{task.role}-{task.index} retry {task.retries + 1} of {allowed} "
                f"after: {task.diagnostics or f'exit code {task.exit_code}'}",
                attempt.number,
                f"{task.role}-{task.index}",
            )
            task.state = TaskState.WAITING
            task.retries += 1


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
