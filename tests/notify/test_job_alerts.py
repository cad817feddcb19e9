"""A job's end, preemption and long wait reach its owner once, by e-mail and by a signed
webhook, through the real SMTP server and receiver (jobs run on the local backend)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from jobs import lifecycle
from jobs.lifecycle.preempt import preempt
from jobs.models import Job, JobAttempt
from jobs.states import JobState
from notify import delivery, outbox
from notify.models import Notification
from notify.sweep import sweep
from tests.api.helpers import job_with_tasks
from tests.jobs.helpers import settle
from tests.jobs.samples import hello_job
from tests.notify.conftest import wants_alerts
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_failing_job_sends_one_email_and_one_signed_webhook(
    alice, backend, smtp, receiver, eager
):
    wants_alerts(alice, receiver)
    job = lifecycle.submit(alice, hello_job("breaks", command="exit 3"))

    job = settle(backend, job)

    assert job.state == JobState.FAILED
    [mail] = smtp.messages()
    assert mail["To"] == "alice@lab.example"
    assert mail["Subject"].startswith("[GPU portal] job alice~breaks failed")
    text = mail.get_payload(decode=True).decode()
    assert "state: FAILED" in text and "exitCode: 3" in text
    assert "https://portal.lab.example/jobs/alice~breaks/" in text
    [hook] = receiver.deliveries()
    assert hook["valid"] and hook["event"] == "job.failed"
    assert hook["path"] == "/hooks/portal?from=tests"
    assert hook["contentType"] == "application/json"
    body = hook["body"]
    assert body["job"]["name"] == "alice~breaks"
    assert body["job"]["state"] == "FAILED" and body["job"]["exitCode"] == 3
    assert body["job"]["reason"] and body["job"]["reason"] in body["message"]
    assert body["job"]["url"] == "https://portal.lab.example/jobs/alice~breaks/"
    rows = Notification.objects.filter(job=job)
    assert {(r.channel, r.status) for r in rows} == {("email", "sent"), ("webhook", "sent")}
    assert hook["delivery"] == str(rows.get(channel="webhook").delivery_id)


def test_the_same_end_is_never_sent_twice(alice, backend, smtp, receiver, eager):
    wants_alerts(alice, receiver)
    job = settle(backend, lifecycle.submit(alice, hello_job("twice", command="exit 1")))
    rows = list(Notification.objects.filter(job=job))

    for row in rows:  # the task delivered again, as a duplicate message would
        assert delivery.deliver(row.id) is None
        assert delivery.deliver(row.id) is None
    sweep(backend)
    sweep(backend)
    settle(backend, job)  # more passes over the ended job

    assert len(smtp.messages()) == 1
    assert len(receiver.deliveries()) == 1
    assert Notification.objects.filter(job=job).count() == 2


def test_a_job_that_succeeds_is_told_by_its_extras_even_without_settings(
    alice, backend, smtp, receiver, eager
):
    alice.email = "alice@lab.example"
    alice.save()
    text = hello_job("fine", command="true") + "extras:\n  notify: {events: [succeeded]}\n"

    job = settle(backend, lifecycle.submit(alice, text))

    assert job.state == JobState.SUCCEEDED
    [mail] = smtp.messages()
    assert mail["Subject"].startswith("[GPU portal] job alice~fine succeeded")
    assert receiver.deliveries() == []  # no webhook set


def test_a_job_may_turn_its_owners_alerts_off(alice, backend, smtp, receiver, eager):
    wants_alerts(alice, receiver)
    text = hello_job("quiet", command="exit 2") + "extras:\n  notify: {events: []}\n"

    job = settle(backend, lifecycle.submit(alice, text))

    assert job.state == JobState.FAILED
    assert not Notification.objects.filter(job=job).exists()
    assert smtp.messages() == [] and receiver.deliveries() == []


def test_an_owner_who_asked_for_nothing_gets_nothing(alice, backend, smtp, receiver, eager):
    alice.email = "alice@lab.example"
    alice.save()
    job = settle(backend, lifecycle.submit(alice, hello_job("plain", command="exit 1")))

    assert job.state == JobState.FAILED
    assert not Notification.objects.exists()
    assert smtp.messages() == []


def running_borrower(owner) -> Job:
    job = job_with_tasks(owner, "borrower")
    Job.objects.filter(id=job.id).update(state=JobState.RUNNING, borrowing=True)
    return job


def test_a_preempted_job_is_told_once(alice, smtp, receiver, eager):
    wants_alerts(alice, receiver, email=False)
    job = running_borrower(alice)

    assert preempt(job.id, "preempted: vc research takes its guarantee back")
    assert not preempt(job.id, "again")

    [hook] = receiver.deliveries()
    assert hook["valid"] and hook["event"] == "job.preempted"
    assert hook["body"]["job"]["state"] == "WAITING"
    assert hook["body"]["job"]["reason"] == "preempted: vc research takes its guarantee back"
    assert smtp.messages() == []


def test_an_alert_that_cannot_be_written_leaves_the_preemption_whole(
    alice, smtp, receiver, eager, monkeypatch, caplog
):
    wants_alerts(alice, receiver, email=False)
    job = running_borrower(alice)

    def refused(rows):  # a database error in the insert, as a lock timeout would be
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 / 0")

    monkeypatch.setattr(outbox, "add", refused)
    # Recorded in the preemption's transaction, which the failed insert must not abort.
    assert preempt(job.id, "preempted: vc research takes its guarantee back")

    job.refresh_from_db()
    assert (job.state, job.retries) == (JobState.WAITING, 1)
    assert job.events.filter(kind="preempted").exists()
    assert "could not record the alerts of job" in caplog.text
    assert not Notification.objects.exists() and receiver.deliveries() == []


def test_a_long_wait_is_told_once_per_wait(alice, backend, smtp, receiver, eager):
    wants_alerts(alice, receiver, waiting_minutes=30)
    long = lifecycle.submit(alice, hello_job("long"))
    short = lifecycle.submit(alice, hello_job("short"))
    Job.objects.filter(id=long.id).update(created_at=timezone.now() - timedelta(minutes=31))
    Job.objects.filter(id=short.id).update(created_at=timezone.now() - timedelta(minutes=29))

    assert sweep(backend).waits == 1
    assert sweep(backend).waits == 0

    [hook] = receiver.deliveries()
    assert hook["event"] == "job.waiting" and hook["body"]["job"]["name"] == "alice~long"
    [mail] = smtp.messages()
    assert mail["Subject"].startswith("[GPU portal] job alice~long has waited too long")


def test_a_wait_after_a_preemption_counts_from_the_preemption(alice, backend, receiver, eager):
    wants_alerts(alice, receiver, email=False, events=["waiting"], waiting_minutes=30)
    job = running_borrower(alice)
    Job.objects.filter(id=job.id).update(created_at=timezone.now() - timedelta(hours=5))
    preempt(job.id, "preempted")
    JobAttempt.objects.filter(job=job).update(completed_at=timezone.now() - timedelta(minutes=5))

    assert sweep(backend).waits == 0

    JobAttempt.objects.filter(job=job).update(completed_at=timezone.now() - timedelta(minutes=31))
    assert sweep(backend).waits == 1
    assert [d["event"] for d in receiver.deliveries()] == ["job.waiting"]


def test_a_job_waiting_past_its_own_threshold_is_told(alice, backend, smtp, eager):
    alice.email = "alice@lab.example"
    alice.save()
    text = hello_job("patient") + "extras:\n  notify: {events: [waiting], waitingMinutes: 5}\n"
    job = lifecycle.submit(alice, text)
    Job.objects.filter(id=job.id).update(created_at=timezone.now() - timedelta(minutes=6))

    assert sweep(backend).waits == 1
    wait_for(lambda: len(smtp.messages()) == 1)
