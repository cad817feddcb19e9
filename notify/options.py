"""A user's alert settings as the page and the API read and change them: one set of rules for
both, so that each refuses the same input with the same words."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from notify import addresses
from notify.choose import settings_of
from notify.models import DEFAULT_EVENTS, EVENTS, PORTAL_ALERT, AlertSettings, Notification
from protocol.notify_extras import JOB_EVENTS

RECENT = 20  # deliveries shown


class Invalid(ValueError):
    """Input refused: ``field`` names it (the API's name), the message says the rule."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def events_for(user: AbstractBaseUser) -> tuple[str, ...]:
    """The events ``user`` may choose: a job's, and for admins the portal's own alerts."""
    return EVENTS if getattr(user, "is_staff", False) else JOB_EVENTS


def check_url(url: str) -> str:
    """The URL, stripped, when a webhook may use it ("" turns the webhook off)."""
    url = url.strip()
    if url:
        try:
            addresses.resolve(url)
        except addresses.Refused as exc:
            raise Invalid("webhookUrl", str(exc)) from None
    return url


def check_events(user: AbstractBaseUser, events: list[str]) -> list[str]:
    allowed = events_for(user)
    for event in events:
        if event not in allowed:
            if event == PORTAL_ALERT:
                raise Invalid("events", f'"{PORTAL_ALERT}" (the portal\'s alerts) is for admins')
            raise Invalid("events", f"{event!r} is not one of {', '.join(allowed)}")
    return sorted(set(events), key=EVENTS.index)


def check_email(user: AbstractBaseUser, on: bool) -> bool:
    if on and not settings.EMAIL_HOST:
        raise Invalid("email", "the portal sends no e-mail (its EMAIL_HOST is not set)")
    if on and not getattr(user, "email", ""):
        raise Invalid("email", "the account has no e-mail address to send to")
    return on


def save(user: AbstractBaseUser, changes: dict[str, Any]) -> AlertSettings:
    """Apply ``changes`` (model field names, checked) to the user's settings. A webhook needs
    a secret to sign with; a webhook turned off forgets its secret."""
    row = settings_of(user) or AlertSettings(user=user)
    for field, value in changes.items():
        setattr(row, field, value)
    if not row.webhook_url:
        row.webhook_secret = ""
    elif not row.webhook_secret:
        raise Invalid("webhookSecret", "is required with a webhook URL: it signs each delivery")
    row.save()
    user.alert_settings = row  # type: ignore[attr-defined]
    return row


def recent(user: AbstractBaseUser) -> QuerySet[Notification]:
    return Notification.objects.filter(user_id=user.pk).select_related("job__owner")[:RECENT]


def describe(user: AbstractBaseUser) -> dict[str, Any]:
    """The settings in the API's words; the secret only as whether one is set."""
    row = settings_of(user)
    return {
        "email": bool(row and row.email),
        "emailAddress": getattr(user, "email", ""),
        "emailAvailable": bool(settings.EMAIL_HOST),
        "webhookUrl": row.webhook_url if row else "",
        "webhookSecretSet": bool(row and row.webhook_secret),
        "events": list(row.events) if row else list(DEFAULT_EVENTS),
        "waitingMinutes": row.waiting_minutes if row else None,
        "defaultWaitingMinutes": round(settings.ALERT_JOB_WAITING_SECONDS / 60),
        "availableEvents": list(events_for(user)),
        "deliveries": [delivery(n) for n in recent(user)],
    }


def delivery(row: Notification) -> dict[str, Any]:
    def iso(value: Any) -> str | None:
        return value.isoformat() if value else None

    return {
        "id": str(row.delivery_id),
        "event": row.event,
        "channel": row.channel,
        "subject": row.subject,
        "job": str(row.job) if row.job_id else None,
        "status": row.status,
        "attempts": row.attempts,
        "createdTime": iso(row.created_at),
        "sentTime": iso(row.sent_at),
        "nextTryTime": iso(row.next_try_at) if row.status == Notification.PENDING else None,
        "lastError": row.last_error,
    }
