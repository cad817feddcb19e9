"""Beat's sweep, every ``NOTIFY_SWEEP_SECONDS``: rows whose delivery was never queued (the
broker was down when they were committed) or whose worker died are queued again; jobs that
have waited too long and new portal alerts become rows. Two sweeps at once add nothing twice
(the outbox's unique keys) and send nothing twice (the delivery's claim)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from backends.base import Backend
from notify import outbox
from notify.delivery import stale_after
from notify.job_alerts import long_waits
from notify.models import Notification
from notify.portal_alerts import tell_admins

log = logging.getLogger(__name__)
# A row due this long ago and still pending: its queued task is late or lost. Longer than a
# queued task usually waits, so that the sweep does not race every fresh delivery.
LATE = timedelta(seconds=30)
BATCH = 1000  # rows queued per sweep at most (the next sweep takes the rest)


@dataclass
class SweepReport:
    queued: int = 0
    revived: int = 0
    waits: int = 0
    portal_alerts: int = 0


def sweep(backend: Backend, now: datetime | None = None) -> SweepReport:
    now = now or timezone.now()
    report = SweepReport()
    report.revived = Notification.objects.filter(
        status=Notification.SENDING, claimed_at__lt=now - stale_after()
    ).update(status=Notification.PENDING, claimed_at=None)
    late = Notification.objects.filter(status=Notification.PENDING, next_try_at__lte=now - LATE)
    for notification_id in late.order_by("next_try_at").values_list("id", flat=True)[:BATCH]:
        outbox.queue(notification_id)
        report.queued += 1
    report.waits = long_waits(now)
    report.portal_alerts = tell_admins(backend, now)
    return report
