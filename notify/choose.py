"""Who is told of what, by which channel: the owner's settings, which the job's
``extras.notify`` may override for that job (``protocol.notify_extras``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser

from notify.models import DEFAULT_EVENTS, EVENTS, AlertSettings, Notification


@dataclass(frozen=True)
class Choice:
    events: frozenset[str]
    email: bool
    webhook: bool
    waiting_seconds: float

    def channels(self, event: str) -> list[str]:
        """The channels ``event`` goes out on (none when it is not wanted)."""
        if event not in self.events:
            return []
        wanted = [(self.email, Notification.EMAIL), (self.webhook, Notification.WEBHOOK)]
        return [channel for on, channel in wanted if on]


def settings_of(user: AbstractBaseUser) -> AlertSettings | None:
    """The user's settings, read through ``select_related`` when the caller asked for them."""
    try:
        row: AlertSettings = user.alert_settings  # type: ignore[attr-defined]
    except AlertSettings.DoesNotExist:
        return None
    return row


def email_possible(user: AbstractBaseUser) -> bool:
    """The portal sends e-mail (EMAIL_HOST) and the account has an address."""
    return bool(settings.EMAIL_HOST and getattr(user, "email", ""))


def webhook_set(row: AlertSettings | None) -> bool:
    return bool(row and row.webhook_url and row.webhook_secret)


def user_choice(user: AbstractBaseUser) -> Choice:
    """What the user's own settings ask for (no settings: nothing)."""
    row = settings_of(user)
    if row is None:
        return Choice(frozenset(), False, False, settings.ALERT_JOB_WAITING_SECONDS)
    waiting = row.waiting_minutes * 60.0 if row.waiting_minutes else None
    return Choice(
        events=frozenset(e for e in row.events if e in EVENTS),
        email=row.email and email_possible(user),
        webhook=webhook_set(row),
        waiting_seconds=waiting or settings.ALERT_JOB_WAITING_SECONDS,
    )


def job_choice(user: AbstractBaseUser, protocol: Any) -> Choice:
    """The owner's choice with the job's ``extras.notify`` over it. A job that asks for alerts
    from an owner without settings gets them by e-mail unless it says otherwise."""
    base = user_choice(user)
    extras = protocol.get("extras") if isinstance(protocol, dict) else None
    notify = extras.get("notify") if isinstance(extras, dict) else None
    if not isinstance(notify, dict):  # checked at submit; a job from before is taken as is
        return base
    has_settings = settings_of(user) is not None
    events = notify.get("events", DEFAULT_EVENTS if not has_settings else list(base.events))
    email = notify.get("email", base.email if has_settings else True)
    webhook = notify.get("webhook", base.webhook)
    minutes = notify.get("waitingMinutes")
    return Choice(
        events=frozenset(e for e in events if isinstance(e, str) and e in EVENTS)
        if isinstance(events, list)
        else base.events,
        email=email is True and email_possible(user),
        webhook=webhook is True and webhook_set(settings_of(user)),
        waiting_seconds=minutes * 60.0
        if isinstance(minutes, int) and minutes > 0
        else base.waiting_seconds,
    )
