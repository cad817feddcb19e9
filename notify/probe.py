"""A test alert on each channel the user has turned on: "alerts reach you here"."""

from __future__ import annotations

import uuid

from django.contrib.auth.models import AbstractBaseUser

from notify import outbox
from notify.bodies import probe_body
from notify.choose import email_possible, settings_of, webhook_set
from notify.models import Notification


def send_probe(user: AbstractBaseUser) -> list[str]:
    """Queue a test alert on each channel that is on; the channels (none: nothing to test)."""
    row = settings_of(user)
    on = [(bool(row and row.email and email_possible(user)), Notification.EMAIL)]
    on.append((webhook_set(row), Notification.WEBHOOK))
    channels = [channel for wanted, channel in on if wanted]
    subject, body = probe_body(user.get_username())
    once = uuid.uuid4().hex
    outbox.add(
        Notification(
            key=f"test:{once}:{channel}:{user.pk}",
            user_id=user.pk,
            event="test",
            channel=channel,
            subject=subject,
            body=body,
        )
        for channel in channels
    )
    return channels
