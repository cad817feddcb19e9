"""The job's event log, listened to: a JobEvent of kind "state" or "preempted" may be an alert
(``job_alerts.job_changed``). Listening keeps jobs unaware of alerts; the receiver runs in the
transaction that recorded the event, so the outbox row commits (or not) with it."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
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
        with transaction.atomic():  # a savepoint: a failure here leaves the job's change whole
            job_changed(instance.job_id, instance.kind)
    except Exception:  # an alert never stops a job's lifecycle
        log.exception("could not record the alerts of job %s", instance.job_id)
