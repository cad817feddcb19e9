"""A webhook may not aim the worker at the portal's own services, this host or a cloud's
metadata address: refused when saved, and again at each delivery, on the address it would
connect to (a URL saved before, or a name that now resolves elsewhere)."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings

from jobs.lifecycle.preempt import preempt
from notify import delivery
from notify.models import Notification
from tests.api.helpers import client_for
from tests.notify.conftest import SECRET, wants_alerts
from tests.notify.test_job_alerts import running_borrower

pytestmark = pytest.mark.django_db

URL = "/api/v2/users/me/alerts"


def refused(user, url: str) -> str:
    answer = client_for(user).put(URL, {"webhookUrl": url, "webhookSecret": SECRET}, format="json")
    assert answer.status_code == 400, answer.content
    return answer.json()["message"]


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/",
        "http://localhost/",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://169.254.169.254/latest/meta-data/",
        "http://0.0.0.0/",
    ],
)
def test_this_host_and_metadata_addresses_are_refused_by_default(alice, settings, url):
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    message = refused(alice, url)
    assert message.startswith("webhookUrl: ") and "blocked network" in message


def test_the_portals_redis_stays_refused_on_an_allowed_network(alice, settings):
    assert settings.WEBHOOK_ALLOWED_NETWORKS == ["127.0.0.1/32"]
    redis_port = int(settings.REDIS_URL.rsplit(":", 1)[1].split("/")[0])
    assert "the portal's Redis" in refused(alice, f"http://127.0.0.1:{redis_port}/")


@pytest.mark.skipif(
    not django_settings.DATABASES["default"].get("HOST"), reason="the database is a file"
)
def test_the_portals_database_stays_refused_on_an_allowed_network(alice, settings):
    database = settings.DATABASES["default"]
    message = refused(alice, f"http://{database['HOST']}:{database.get('PORT') or 5432}/")
    assert "the portal's database" in message


@pytest.mark.django_db(transaction=True)
def test_a_delivery_to_a_blocked_address_is_refused_and_never_retried(
    alice, receiver, queued, settings
):
    wants_alerts(alice, receiver, email=False)  # saved while 127.0.0.1 was allowed
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    job = running_borrower(alice)
    preempt(job.id, "preempted")
    row = Notification.objects.get(job=job)

    assert delivery.deliver(row.id) is None

    row.refresh_from_db()
    assert row.status == Notification.FAILED and row.attempts == 1
    assert "blocked network" in row.last_error
    assert receiver.deliveries() == []  # it was listening: nothing reached it
