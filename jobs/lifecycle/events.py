"""The job's event log: one line per step, read by its page and the API."""

from __future__ import annotations

from jobs.models import JobEvent


def record(
    job_id: int, kind: str, message: str, attempt: int | None = None, task: str = ""
) -> None:
    JobEvent.objects.create(
        job_id=job_id, kind=kind, message=message, attempt_number=attempt, task=task
    )
