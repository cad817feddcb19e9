"""One outbox row delivered: claimed with a compare-and-swap (pending and due -> sending), so
that two workers, or a retry and the sweep, never both send it; sent; recorded as sent, or
given a next try after a backoff that doubles, or failed for good after ``NOTIFY_MAX_TRIES``
(its owner's alerts page shows it). Only a worker that dies between sending and recording can
send a row twice (the sweep gives it back after ``stale_after``): the delivery id it carries
lets a receiver drop the second."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from notify import mail, webhook
from notify.choose import settings_of
from notify.models import Notification

log = logging.getLogger(__name__)
EARLY = timedelta(seconds=1)  # a timer may fire this much before the row's next try


def backoff(attempts: int) -> float:
    """Seconds before the next try after ``attempts`` failed ones: doubling, capped."""
    first, cap = settings.NOTIFY_RETRY_SECONDS, settings.NOTIFY_RETRY_MAX_SECONDS
    return float(min(cap, first * 2 ** min(attempts - 1, 40)))


def stale_after() -> timedelta:
    """How long a row may stay "sending" before the sweep takes its worker for dead."""
    slowest = max(settings.WEBHOOK_TIMEOUT_SECONDS, settings.EMAIL_TIMEOUT)
    return timedelta(seconds=4 * slowest + 60)


def deliver(notification_id: int) -> float | None:
    """Try the row once, if it is pending and due; the seconds until its next try, or None
    when there is none to make (sent, failed for good, someone else's, or gone)."""
    now = timezone.now()
    claimed = Notification.objects.filter(
        id=notification_id, status=Notification.PENDING, next_try_at__lte=now + EARLY
    ).update(status=Notification.SENDING, claimed_at=now, attempts=F("attempts") + 1)
    if not claimed:
        return None
    row = Notification.objects.select_related("user", "user__alert_settings").get(
        id=notification_id
    )
    try:
        target = send(row)
    except (mail.MailError, webhook.WebhookError) as exc:
        return failed(row, str(exc), exc.permanent)
    except Exception as exc:  # a bug or the database: still recorded, and tried again
        log.exception("alert %s: unexpected error", row.id)
        return failed(row, f"{type(exc).__name__}: {exc}", permanent=False)
    Notification.objects.filter(id=row.id, status=Notification.SENDING).update(
        status=Notification.SENT, sent_at=timezone.now(), target=target, last_error=""
    )
    return None


def send(row: Notification) -> str:
    """Send the row on its channel; where it went."""
    if row.channel == Notification.EMAIL:
        address = getattr(row.user, "email", "")
        return mail.send(address, row.subject, row.body, row.event, str(row.delivery_id))
    options = settings_of(row.user)
    if options is None or not options.webhook_url or not options.webhook_secret:
        raise webhook.WebhookError("no webhook URL and secret set", permanent=True)
    return webhook.post(
        options.webhook_url,
        options.webhook_secret,
        row.body.encode(),
        row.event,
        str(row.delivery_id),
    )


def failed(row: Notification, error: str, permanent: bool) -> float | None:
    tries = f"try {row.attempts} of {settings.NOTIFY_MAX_TRIES}"
    log.warning("alert %s (%s to user %s): %s: %s", row.id, row.channel, row.user_id, tries, error)
    mine = Notification.objects.filter(id=row.id, status=Notification.SENDING)
    if permanent or row.attempts >= settings.NOTIFY_MAX_TRIES:
        mine.update(status=Notification.FAILED, last_error=f"{tries}: {error}", claimed_at=None)
        return None
    wait = backoff(row.attempts)
    mine.update(
        status=Notification.PENDING,
        next_try_at=timezone.now() + timedelta(seconds=wait),
        last_error=f"{tries}: {error}",
        claimed_at=None,
    )
    return wait
