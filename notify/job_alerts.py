"""A job's alerts: its end, a preemption (from its event log) and a wait longer than its
owner's threshold (found by beat's sweep). Each becomes one outbox row per channel."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Exists, F, Max, OuterRef, Q, QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone

from jobs.models import Job
from jobs.states import FINAL_JOB_STATES, JobState
from notify import outbox
from notify.bodies import job_body
from notify.choose import Choice, job_choice
from notify.models import Notification

KINDS = ("state", "preempted")  # the JobEvent kinds that may be an alert
# The least wait the sweep looks at: no threshold is shorter (waitingMinutes >= 1).
SHORTEST_WAIT = timedelta(minutes=1)
# The jobs that may have an alert at all: their owner has settings, or they ask for alerts
# themselves (``extras.notify``; the protocol is JSON text). Most jobs are neither.
MAY_ALERT = Q(owner__alert_settings__isnull=False) | Q(protocol__contains='"notify"')


def with_settings(jobs: QuerySet[Job]) -> QuerySet[Job]:
    """The job with its owner and the owner's settings in one query, without the columns an
    alert does not read."""
    return jobs.select_related("owner", "owner__alert_settings", "virtual_cluster").defer(
        "submitted_text", "ssh_private_key", "ssh_public_key", "resources", "tags"
    )


def event_of(job: Job, kind: str) -> str | None:
    """The alert a JobEvent of ``kind`` is, read from the job's state now (the event is
    recorded just after the state changed); None when it is none."""
    if kind == "preempted":
        return "preempted"
    if kind == "state" and job.state in FINAL_JOB_STATES:
        return job.state.lower()
    return None  # "stop requested": the job is only STOPPING


def job_changed(job_id: int, kind: str) -> None:
    """Outbox rows for what a JobEvent of ``kind`` says happened to the job. Cheap for a job
    whose owner wants nothing: one query by primary key that finds no row (``MAY_ALERT``; half
    the CPU of reading the job with its owner's settings), nothing written. Runs in the
    caller's transaction, its rows in a savepoint of their own."""
    if kind not in KINDS or not Job.objects.filter(MAY_ALERT, id=job_id).exists():
        return
    job = with_settings(Job.objects.filter(id=job_id)).first()
    if job is None:
        return
    event = event_of(job, kind)
    if event is not None:
        add_rows(job, event, job_choice(job.owner, job.protocol))


def add_rows(job: Job, event: str, choice: Choice) -> None:
    channels = choice.channels(event)
    if not channels:
        return
    subject, body = job_body(job, event)
    with transaction.atomic():  # a savepoint: a failed insert leaves the caller's change whole
        outbox.add(
            Notification(
                key=f"job:{job.id}:{job.retries}:{event}:{channel}:{job.owner_id}",
                user_id=job.owner_id,
                job=job,
                job_retries=job.retries,
                event=f"job.{event}",
                channel=channel,
                subject=subject,
                body=body,
            )
            for channel in channels
        )


def long_waits(now: datetime | None = None) -> int:
    """Rows for the jobs that have waited longer than their owner's threshold since they were
    submitted or last preempted, once per wait (a wait is the job's ``retries``); how many
    jobs were due. Only the jobs of owners with settings, or that ask for alerts themselves,
    and not told of this wait yet, are looked at."""
    now = now or timezone.now()
    told = Notification.objects.filter(
        job=OuterRef("pk"), event="job.waiting", job_retries=OuterRef("retries")
    )
    waiting = (
        Job.objects.filter(MAY_ALERT, state=JobState.WAITING)
        .exclude(Exists(told))
        .annotate(since=Coalesce(Max("attempts__completed_at"), F("created_at")))
        .filter(since__lte=now - SHORTEST_WAIT)
    )
    due = 0
    for job in with_settings(waiting):
        choice = job_choice(job.owner, job.protocol)
        if job.since > now - timedelta(seconds=choice.waiting_seconds):  # type: ignore[attr-defined]
            continue
        due += 1
        add_rows(job, "waiting", choice)
    return due
