"""Deliveries that fail are tried again with a growing backoff until the receiver takes
them, by a real Celery worker; those that never get through show as failed on the owner's
page; a lost queue message or a dead worker loses no alert; two workers never send one twice."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from jobs.lifecycle.preempt import preempt
from notify import delivery
from notify.models import Notification
from notify.sweep import sweep
from tests.api.helpers import client_for
from tests.notify.conftest import wants_alerts
from tests.notify.servers import WebhookReceiver
from tests.notify.test_job_alerts import running_borrower
from tests.support.servers import portal_process
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def preempted_alert(alice, receiver: WebhookReceiver) -> Notification:
    """A webhook alert of alice's, committed and queued (``queued``), not yet tried."""
    wants_alerts(alice, receiver, email=False)
    job = running_borrower(alice)
    preempt(job.id, "preempted")
    return Notification.objects.get(job=job)


def test_the_backoff_doubles_up_to_its_cap(settings):
    settings.NOTIFY_RETRY_SECONDS = 30
    settings.NOTIFY_RETRY_MAX_SECONDS = 1800
    assert [delivery.backoff(n) for n in range(1, 9)] == [
        30, 60, 120, 240, 480, 960, 1800, 1800,
    ]  # fmt: skip


def test_a_webhook_reaches_a_receiver_that_was_down_through_a_real_worker(
    alice, receiver, settings
):
    receiver.stop()  # its port closed: every try is refused
    row = preempted_alert(alice, receiver)  # queued on the broker, after commit
    worker = ["-m", "celery", "-A", "portal", "worker", "--pool", "solo", "-l", "warning"]
    env = {
        "WEBHOOK_ALLOWED_NETWORKS": "127.0.0.1/32",
        "NOTIFY_RETRY_SECONDS": "0.2",
        "NOTIFY_RETRY_MAX_SECONDS": "1",
        "NOTIFY_MAX_TRIES": "1000",
        "EMAIL_HOST": "",
    }
    with portal_process(worker, **env):
        wait_for(lambda: Notification.objects.get(id=row.id).attempts >= 3, timeout=60)
        failing = Notification.objects.get(id=row.id)
        assert failing.status in (Notification.PENDING, Notification.SENDING)
        assert "Connection refused" in failing.last_error

        receiver.start()  # on the same port
        wait_for(lambda: Notification.objects.get(id=row.id).status == Notification.SENT, 60)

    [hook] = receiver.deliveries()
    assert hook["valid"] and hook["event"] == "job.preempted"
    assert hook["delivery"] == str(row.delivery_id)


def test_retries_used_up_show_as_failed_on_the_owners_page(alice, receiver, queued):
    receiver.stop()
    row = preempted_alert(alice, receiver)

    def tried_all() -> bool:  # each try as the worker's retry makes it, once it is due
        delivery.deliver(row.id)
        return Notification.objects.get(id=row.id).status == Notification.FAILED

    wait_for(tried_all)

    failed = Notification.objects.get(id=row.id)
    assert failed.attempts == 4
    assert failed.last_error.startswith("try 4 of 4: ")
    web = Client()
    web.force_login(alice)
    page = web.get("/account/alerts/").content.decode()
    assert "delivery-failed" in page and "Connection refused" in page
    [shown] = client_for(alice).get("/api/v2/users/me/alerts").json()["deliveries"]
    assert shown["status"] == "failed" and "Connection refused" in shown["lastError"]
    assert receiver.deliveries() == []


def test_a_retry_is_not_made_before_it_is_due(alice, receiver, queued, settings):
    settings.NOTIFY_RETRY_SECONDS = settings.NOTIFY_RETRY_MAX_SECONDS = 3600
    receiver.stop()
    row = preempted_alert(alice, receiver)

    assert delivery.deliver(row.id) == 3600
    assert delivery.deliver(row.id) is None  # due in an hour: this one does nothing

    assert Notification.objects.get(id=row.id).attempts == 1


def test_an_alert_whose_queueing_was_lost_is_sent_by_the_sweep(alice, receiver, queued, backend):
    row = preempted_alert(alice, receiver)  # queued: dropped here, as by a broker that is down
    queued.clear()
    sweep(backend)
    assert queued == []  # just committed: its own task may still come

    Notification.objects.filter(id=row.id).update(next_try_at=timezone.now() - timedelta(minutes=1))
    sweep(backend)
    assert queued == [row.id]
    delivery.deliver(row.id)
    assert len(receiver.deliveries()) == 1


def test_a_delivery_whose_worker_died_is_tried_again(alice, receiver, queued, backend):
    row = preempted_alert(alice, receiver)
    long_ago = timezone.now() - timedelta(hours=1)
    Notification.objects.filter(id=row.id).update(  # claimed, then the worker died
        status=Notification.SENDING, claimed_at=long_ago, attempts=1, next_try_at=long_ago
    )

    assert sweep(backend).revived == 1
    delivery.deliver(row.id)

    assert Notification.objects.get(id=row.id).status == Notification.SENT
    assert len(receiver.deliveries()) == 1


def test_two_workers_at_once_send_an_alert_once(alice, receiver, queued):
    row = preempted_alert(alice, receiver)
    start = threading.Barrier(4)

    def worker() -> None:
        start.wait()
        delivery.deliver(row.id)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(receiver.deliveries()) == 1
    assert Notification.objects.get(id=row.id).attempts == 1


def test_a_test_alert_goes_out_on_each_channel(alice, receiver, smtp, queued):
    wants_alerts(alice, receiver)

    answer = client_for(alice).post("/api/v2/users/me/alerts/test")

    assert answer.status_code == 202
    for notification_id in queued:
        delivery.deliver(notification_id)
    assert [d["event"] for d in receiver.deliveries()] == ["test"]
    [mail] = smtp.messages()
    assert "alerts reach you here" in mail["Subject"]
