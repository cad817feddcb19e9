"""Preempt: a borrowing job gives its room back to a guaranteed one (chosen by
``clusters.quota.plan``): its attempt stops and the job waits in its queue again. The next
attempt is a retry (``Job.retries``, OpenPAI's ``retryDetails.resource``) that uses up none
of ``jobRetryCount``."""

from __future__ import annotations

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from jobs.lifecycle.events import record
from jobs.lifecycle.finish import finish_attempt
from jobs.models import Job, JobAttempt, Task
from jobs.states import LIVE_TASK_STATES, JobState


def preempt(job_id: int, reason: str) -> bool:
    """Stop a borrowing job's attempt and put the job back in its queue."""
    with transaction.atomic():
        moved = Job.objects.filter(id=job_id, state=JobState.RUNNING, borrowing=True).update(
            state=JobState.WAITING,
            reason=reason,
            borrowing=False,
            retries=F("retries") + 1,
            updated_at=timezone.now(),
        )
        if not moved:
            return False
        for attempt in JobAttempt.objects.filter(job_id=job_id, state=JobState.RUNNING):
            finish_attempt(attempt, JobState.STOPPED, reason, None, tasks_live=False)
        # every live task of the job, the closed attempts' with them: one statement
        Task.objects.filter(attempt__job_id=job_id, state__in=LIVE_TASK_STATES).update(
            stop_requested=True
        )
        record(job_id, "preempted", reason)
    return True
