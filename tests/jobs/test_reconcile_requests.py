"""Submissions ask for reconcile passes cheaply: one queued task however many ask, and no
change is left for the periodic pass."""

from __future__ import annotations

import pytest
from django.conf import settings

from jobs import lifecycle, wakeup
from jobs.lifecycle import passes
from jobs.lifecycle.report import PassReport
from tests.jobs.samples import hello_job

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    client = wakeup.redis_client(settings.REDIS_URL)
    client.delete(wakeup.QUEUED_KEY, wakeup.WANTED_KEY, wakeup.LOCK_NAME)
    calls: list[int] = []
    monkeypatch.setattr(wakeup, "send_reconcile", lambda: calls.append(1))
    yield calls
    client.delete(wakeup.QUEUED_KEY, wakeup.WANTED_KEY, wakeup.LOCK_NAME)


def test_many_submissions_queue_one_task_until_it_starts(alice, backend, queued, monkeypatch):
    for n in range(10):
        lifecycle.submit(alice, hello_job(name=f"many_{n}"))
    assert queued == [1]
    ran: list[int] = []
    monkeypatch.setattr(passes, "run_pass", lambda b, c, take_more: ran.append(1) or PassReport())
    passes.reconcile(backend)  # the task starts: the next submission queues another
    assert ran == [1]
    lifecycle.submit(alice, hello_job(name="after"))
    assert queued == [1, 1]


def test_a_change_wanted_during_a_pass_gets_another_pass(alice, backend, queued, monkeypatch):
    ran: list[int] = []

    def one_pass(b: object, c: object, take_more: bool) -> PassReport:
        ran.append(1)
        if len(ran) == 1:  # a job arrives while the first pass runs
            lifecycle.submit(alice, hello_job(name="during"))
        return PassReport(admitted=len(ran))

    monkeypatch.setattr(passes, "run_pass", one_pass)
    report = passes.reconcile(backend)
    assert ran == [1, 1]
    assert report.admitted == 2


def test_a_task_that_finds_a_pass_running_leaves_the_work_to_it(backend, queued, monkeypatch):
    monkeypatch.setattr(
        passes, "run_pass", lambda b, c, take_more: pytest.fail("ran beside another pass")
    )
    with wakeup.reconcile_lock() as got:
        assert got
        assert passes.reconcile(backend).skipped


def test_a_task_that_stops_after_its_last_pass_while_more_is_wanted_queues_another(
    backend, queued, monkeypatch
):
    def busy_pass(b: object, c: object, take_more: bool) -> PassReport:
        wakeup.request_pass()  # something changes during every pass
        return PassReport()

    monkeypatch.setattr(passes, "run_pass", busy_pass)
    passes.reconcile(backend)  # MAX_PASSES passes, then it gives the worker back
    client = wakeup.redis_client(settings.REDIS_URL)
    client.delete(wakeup.QUEUED_KEY)  # as the task queued during its passes starts
    queued.clear()
    passes.reconcile(backend)
    assert queued == [1]  # the change wanted after its last pass is not left to beat
