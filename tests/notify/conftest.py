"""Fixtures of the alert tests: a real SMTP server and a real webhook receiver, the settings
that point the portal at them, and deliveries run as the worker would run them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from celery import current_app
from django.contrib.auth.models import User

from notify import outbox
from notify.models import AlertSettings
from tests.notify.servers import SmtpServer, WebhookReceiver

SECRET = "s3cret-of-alice-only"


@pytest.fixture
def smtp(tmp_path: Path) -> Iterator[SmtpServer]:
    server = SmtpServer(tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[WebhookReceiver]:
    server = WebhookReceiver(tmp_path, SECRET)
    server.start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _alert_settings(settings, smtp: SmtpServer) -> None:
    # pytest-django swaps in the in-memory backend: the tests want the mails really sent.
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST = "127.0.0.1"
    settings.EMAIL_PORT = smtp.port
    settings.DEFAULT_FROM_EMAIL = "portal@lab.example"
    settings.PORTAL_URL = "https://portal.lab.example"
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]  # the receiver runs on this host
    settings.NOTIFY_RETRY_SECONDS = 0.05
    settings.NOTIFY_RETRY_MAX_SECONDS = 0.2
    settings.NOTIFY_MAX_TRIES = 4


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The ids of the deliveries queued, instead of sending them to the broker: the test runs
    them (``notify.delivery.deliver``) as the worker would."""
    ids: list[int] = []
    monkeypatch.setattr(
        outbox, "queue", lambda notification_id, countdown=None: ids.append(notification_id)
    )
    return ids


@pytest.fixture
def eager() -> Iterator[None]:
    """Queued deliveries run in place (CELERY_TASK_ALWAYS_EAGER): the whole path from the
    job's event to the receiver, through the Celery task, in the test's process."""
    current_app.conf.task_always_eager = True
    yield
    current_app.conf.task_always_eager = False


def wants_alerts(user: User, receiver: WebhookReceiver, **fields: object) -> AlertSettings:
    """``user`` with an e-mail address, e-mail on and the receiver as their webhook."""
    user.email = f"{user.username}@lab.example"
    user.save()
    values = {"email": True, "webhook_url": receiver.url, "webhook_secret": SECRET, **fields}
    return AlertSettings.objects.create(user=user, **values)
