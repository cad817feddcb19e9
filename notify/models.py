"""A user's alert settings, the outbox of alerts to deliver, and the portal alerts seen."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from jobs.models import Job
from protocol.notify_extras import JOB_EVENTS

# What an admin may also be told of: the portal's own alerts (GET /api/v2/alerts).
PORTAL_ALERT = "alert"
EVENTS = (*JOB_EVENTS, PORTAL_ALERT)
DEFAULT_EVENTS = ["succeeded", "failed", "preempted", "waiting"]  # "stopped": one's own act


def default_events() -> list[str]:
    return list(DEFAULT_EVENTS)


class AlertSettings(models.Model):
    """What a user wants to be told, and where. The webhook secret signs each body; it is
    stored (HMAC needs it) and never shown again: pages and the API say only that one is
    set."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="alert_settings"
    )
    email = models.BooleanField(default=False)  # to the account's e-mail address
    webhook_url = models.URLField(max_length=2000, blank=True)  # "": no webhook
    webhook_secret = models.CharField(max_length=256, blank=True)
    events = models.JSONField(default=default_events)
    # "waited too long" after this many minutes; None: ALERT_JOB_WAITING_SECONDS
    waiting_minutes = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"alert settings of {self.user_id}"


class Notification(models.Model):
    """One alert on one channel: the outbox row. ``key`` names the event and channel (a job's:
    ``job:<id>:<retries>:<event>:<channel>:<user>``; a portal alert's: ``alert:<fingerprint of
    its labels>:<startsAt>:<channel>:<user>``), so the same event is never a second row.
    ``body`` is the JSON sent, fixed when the event happened, so that every try sends (and
    signs) the same bytes; the address is read at each try (a user may mend it meanwhile)."""

    PENDING, SENDING, SENT, FAILED = "pending", "sending", "sent", "failed"
    STATUSES = [(s, s) for s in (PENDING, SENDING, SENT, FAILED)]
    EMAIL, WEBHOOK = "email", "webhook"
    CHANNELS = [(EMAIL, "e-mail"), (WEBHOOK, "webhook")]

    key = models.CharField(max_length=255, unique=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications"
    )
    job = models.ForeignKey(Job, on_delete=models.SET_NULL, null=True, blank=True)
    job_retries = models.PositiveIntegerField(null=True, blank=True)  # the job's, at the event
    event = models.CharField(max_length=32)  # job.failed, job.waiting, alert, test, ...
    channel = models.CharField(max_length=8, choices=CHANNELS)
    delivery_id = models.UUIDField(default=uuid.uuid4, unique=True)  # the receiver's dedup key
    subject = models.CharField(max_length=255)  # the e-mail's subject, the page's summary
    body = models.TextField()
    status = models.CharField(max_length=8, choices=STATUSES, default=PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_try_at = models.DateTimeField(default=timezone.now)
    claimed_at = models.DateTimeField(null=True, blank=True)  # when the running try began
    sent_at = models.DateTimeField(null=True, blank=True)
    target = models.CharField(max_length=2000, blank=True)  # where the last try went
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            models.Index(fields=["status", "next_try_at"], name="notification_due"),
            models.Index(fields=["user", "-created_at"], name="notification_user_recent"),
            models.Index(fields=["job", "event"], name="notification_job_event"),
        ]
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.event} by {self.channel} to {self.user_id}: {self.status}"


class PortalAlert(models.Model):
    """A portal alert (``jobs.alerts``) as the sweep has seen it: one row per episode, so that
    each is told once. An alert whose start is known (a task killed for memory, a node silent
    since) is the same alert while its labels and start are; one that only says "now" (a
    backend that does not answer) is the same while the sweep keeps seeing it."""

    fingerprint = models.CharField(max_length=64)  # sha256 of its labels
    starts_at = models.DateTimeField()
    seen_at = models.DateTimeField()
    name = models.CharField(max_length=64)
    summary = models.TextField()
    labels = models.JSONField(default=dict)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["fingerprint", "starts_at"], name="portal_alert_once")
        ]
        indexes = [models.Index(fields=["fingerprint", "-seen_at"], name="portal_alert_recent")]

    def __str__(self) -> str:
        return f"{self.name} since {self.starts_at:%Y-%m-%d %H:%M:%S}"
