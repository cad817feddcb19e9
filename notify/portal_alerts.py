"""The portal's own alerts (``jobs.alerts``: tasks killed for memory, silent nodes, a backend
that does not answer) told to the admins who asked, each alert once.

An alert is known by a fingerprint of its labels and by when it started. One whose start is
known stays the same alert while its labels and start are; one that says only "now" (an
unreachable backend) stays the same while each sweep sees it again, within ``gap()``: when it
comes back after that, it is a new alert."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from backends.base import Backend
from jobs.alerts import cluster_alerts, memory_kills
from jobs.models import Job
from notify import outbox
from notify.bodies import alert_body
from notify.choose import user_choice
from notify.models import PORTAL_ALERT, Notification, PortalAlert


def gap() -> timedelta:
    """How long an alert may go unseen and still be the same one: a few sweeps."""
    return timedelta(seconds=3 * settings.NOTIFY_SWEEP_SECONDS)


def fingerprint(labels: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(labels, sort_keys=True, default=str).encode()).hexdigest()


def current(backend: Backend, now: datetime) -> list[dict[str, Any]]:
    """What GET /api/v2/alerts shows an admin, less long waits (their owners are told)."""
    since = now - timedelta(seconds=settings.ALERT_WINDOW_SECONDS)
    return memory_kills(Job.objects.all(), since) + cluster_alerts(backend, now)


def new_alerts(alerts: list[dict[str, Any]], now: datetime) -> list[dict[str, Any]]:
    """The alerts of ``alerts`` not seen before, each recorded (and given its start: "now"
    only for a new one), so that no later sweep finds it new again."""
    fresh = []
    for alert in alerts:
        labels = alert["labels"]
        print_ = fingerprint(labels)
        starts = parse_datetime(alert["startsAt"]) or now
        last = PortalAlert.objects.filter(fingerprint=print_).order_by("-seen_at").first()
        if last is not None and starts >= now and last.seen_at >= now - gap():
            starts = last.starts_at  # "now" again: the same outage, still going on
        seen = PortalAlert.objects.filter(fingerprint=print_, starts_at=starts)
        if seen.update(seen_at=now):
            continue
        try:
            with transaction.atomic():
                PortalAlert.objects.create(
                    fingerprint=print_,
                    starts_at=starts,
                    seen_at=now,
                    name=labels["alertname"],
                    summary=alert["annotations"]["summary"],
                    labels=labels,
                )
        except IntegrityError:  # another sweep recorded it first: theirs to tell
            continue
        fresh.append({**alert, "startsAt": starts.isoformat()})
    return fresh


def tell_admins(backend: Backend, now: datetime | None = None) -> int:
    """Outbox rows for each new portal alert to each admin who asked; how many were new."""
    now = now or timezone.now()
    fresh = new_alerts(current(backend, now), now)
    PortalAlert.objects.filter(seen_at__lt=now - timedelta(days=30)).delete()
    if not fresh:
        return 0
    admins = get_user_model().objects.filter(is_staff=True, is_active=True)
    admins = admins.filter(alert_settings__isnull=False).select_related("alert_settings")
    for admin in admins:
        channels = user_choice(admin).channels(PORTAL_ALERT)
        for alert in fresh:
            subject, body = alert_body(alert, now)
            print_ = fingerprint(alert["labels"])
            outbox.add(
                Notification(
                    key=f"alert:{print_}:{alert['startsAt']}:{channel}:{admin.pk}",
                    user=admin,
                    event=PORTAL_ALERT,
                    channel=channel,
                    subject=subject,
                    body=body,
                )
                for channel in channels
            )
    return len(fresh)
