"""Settle: apply the completion policy (``completion.decide``) and retries to running
attempts, close the jobs that ended, and finish what a pass that died half-way began."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection

from backends.base import Backend
from jobs.lifecycle.completion import TaskView, decide
from jobs.lifecycle.finish import finish_attempt, finish_job
from jobs.lifecycle.observe import TaskRow, task_rows
from jobs.lifecycle.report import PassReport
from jobs.lifecycle.retry import retry_job, retry_tasks
from jobs.lifecycle.stop import settle_stopping
from jobs.models import Job, JobAttempt, Task
from jobs.states import LIVE_TASK_STATES, JobState, TaskState


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
            finish_attempt(attempt, job.state, job.reason, job.exit_code)
            continue
        retry_tasks(job, attempt, tasks)
        verdict = decide(
            job.protocol,
            (TaskView(t.role, t.index, t.state, t.exit_code, t.diagnostics) for t in tasks),
        )
        if verdict is None:
            continue
        live = any(t.state in LIVE_TASK_STATES for t in tasks)  # as retry_tasks left them
        if not finish_attempt(attempt, verdict.state, verdict.reason, verdict.exit_code, live):
            continue  # another pass finished it (and tells the job's pages)
        report.touched_jobs.add(job.id)
        if verdict.state == TaskState.FAILED and retry_job(job, attempt, backend):
            continue
        if finish_job(job, verdict.state, verdict.reason, verdict.exit_code):
            report.finished_jobs += 1


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
        elif last.state == JobState.FAILED and retry_job(job, last, backend):
            continue
        elif finish_job(job, last.state, last.reason, last.exit_code):
            report.finished_jobs += 1
        report.touched_jobs.add(job.id)
