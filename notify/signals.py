"""The job's event log, listened to: a JobEvent of kind "state" or "preempted" may be an alert
(``job_alerts.job_changed``). Listening keeps jobs unaware of alerts; the receiver runs in the
transaction that recorded the event, so the outbox row commits (or not) with it. Its writes are
in a savepoint, so a failed insert leaves the job's change whole; its one read, by primary key,
is not (a savepoint cost every job's end two more round trips): it fails only where the
connection or the database does, which fails the job's change all the same."""

from __future__ import annotations

import logging
from typing import Any

from django.db.models.signals import post_save
from django.dispatch import receiver

from jobs.models import JobEvent
from notify.job_alerts import KINDS, job_changed

log = logging.getLogger(__name__)


@receiver(post_save, sender=JobEvent, dispatch_uid="notify.job_event")
def on_job_event(sender: type[JobEvent], instance: JobEvent, created: bool, **kwargs: Any) -> None:
    if not created or kwargs.get("raw") or instance.kind not in KINDS:
        return
    try:
        job_changed(instance.job_id, instance.kind)
    except Exception:  # an alert never stops a job's lifecycle
        log.exception("could not record the alerts of job %s", instance.job_id)
