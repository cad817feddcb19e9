"""Retries: a failed task with ``taskRetryCount`` left goes back to WAITING; a failed attempt
with ``jobRetryCount`` left makes way for the next attempt.

Each task retry is counted in ``retries`` and, when its failure was not transient in
OpenPAI's exit spec, in ``accountable_retries`` (OpenPAI's ``accountableRetries``). A job's
``retries`` also counts the restarts after a preemption (OpenPAI's framework is retried then
too), which do not use up ``jobRetryCount``. The limits count every retry after a failure:
OpenPAI's controller retries a transient failure without limit, which here could loop."""

from __future__ import annotations

from django.db.models import F

from backends.base import Backend
from jobs.exitspec import spec_retry_cause
from jobs.lifecycle.events import record
from jobs.lifecycle.launch import start_attempt
from jobs.lifecycle.observe import TaskRow
from jobs.models import Job, JobAttempt, Task
from jobs.states import JobState, TaskState


def task_retry_count(job: Job, role: str) -> int:
    return int(job.protocol["taskRoles"][role].get("taskRetryCount", 0))


def retry_tasks(job: Job, attempt: JobAttempt, tasks: list[TaskRow]) -> None:
    """Send failed tasks with retries left back to WAITING; they launch in the next pass."""
    due = [
        task
        for task in tasks
        if task.state == TaskState.FAILED
        and not task.stop_requested
        and task.retries < task_retry_count(job, task.role)
    ]
    if not due:
        return
    specs = dict(Task.objects.filter(id__in=[t.id for t in due]).values_list("id", "exit_spec"))
    for task in due:
        accountable = spec_retry_cause(specs.get(task.id)) == "user"
        moved = Task.objects.filter(
            id=task.id, state=TaskState.FAILED, retries=task.retries
        ).update(
            state=TaskState.WAITING,
            retries=task.retries + 1,
            accountable_retries=F("accountable_retries") + int(accountable),
            backend_ref="",
            completed_at=None,
        )
        if moved:
            record(
                job.id,
                "task",
                f"{task.role}-{task.index} retry {task.retries + 1} of "
                f"{task_retry_count(job, task.role)} "
                f"after: {task.diagnostics or f'exit code {task.exit_code}'}",
                attempt.number,
                f"{task.role}-{task.index}",
            )
            task.state = TaskState.WAITING
            task.retries += 1


def retry_job(job: Job, attempt: JobAttempt, backend: Backend) -> bool:
    """Start the next attempt when ``jobRetryCount`` allows; False when none is left. The
    attempts a preemption stopped are not retries after a failure: they use up none."""
    allowed = int(job.protocol.get("jobRetryCount", 0))
    preempted = JobAttempt.objects.filter(job=job, state=JobState.STOPPED).count()
    if job.retries - preempted >= allowed:
        return False
    moved = Job.objects.filter(id=job.id, state=JobState.RUNNING, retries=job.retries).update(
        retries=job.retries + 1, reason=f"retrying after attempt {attempt.number} failed"
    )
    if moved:
        job.retries += 1
        start_attempt(job, backend, attempt.number + 1)
    return True
