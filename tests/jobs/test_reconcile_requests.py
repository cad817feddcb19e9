"""Submissions ask for reconcile passes cheaply: one queued task however many ask, and no
change is left for the periodic pass."""

from __future__ import annotations

import pytest
from django.conf import settings

from jobs import lifecycle, reconcile, wakeup
from jobs.reconcile import PassReport
from tests.jobs.samples import hello_job

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    client = reconcile.redis_client(settings.REDIS_URL)
    client.delete(reconcile.QUEUED_KEY, reconcile.WANTED_KEY, reconcile.LOCK_NAME)
    calls: list[int] = []
    monkeypatch.setattr(wakeup, "send_reconcile", lambda: calls.append(1))
    yield calls
    client.delete(reconcile.QUEUED_KEY, reconcile.WANTED_KEY, reconcile.LOCK_NAME)


def test_many_submissions_queue_one_task_until_it_starts(alice, backend, queued, monkeypatch):
    for n in range(10):
        lifecycle.submit(alice, hello_job(name=f"many_{n}"))
    assert queued == [1]
    passes: list[int] = []
    monkeypatch.setattr(reconcile, "run_pass", lambda b, c: passes.append(1) or PassReport())
    reconcile.reconcile(backend)  # the task starts: the next submission queues another
    assert passes == [1]
    lifecycle.submit(alice, hello_job(name="after"))
    assert queued == [1, 1]


def test_a_change_wanted_during_a_pass_gets_another_pass(alice, backend, queued, monkeypatch):
    passes: list[int] = []

    def one_pass(b: object, c: object) -> PassReport:
        passes.append(1)
        if len(passes) == 1:  # a job arrives while the first pass runs
            lifecycle.submit(alice, hello_job(name="during"))
        return PassReport(admitted=len(passes))

    monkeypatch.setattr(reconcile, "run_pass", one_pass)
    report = reconcile.reconcile(backend)
    assert passes == [1, 1]
    assert report.admitted == 2


def test_a_task_that_finds_a_pass_running_leaves_the_work_to_it(backend, queued, monkeypatch):
    monkeypatch.setattr(reconcile, "run_pass", lambda b, c: pytest.fail("ran beside another pass"))
    with reconcile.reconcile_lock() as got:
        assert got
        assert reconcile.reconcile(backend).skipped


def test_a_task_that_stops_after_its_last_pass_while_more_is_wanted_queues_another(
    backend, queued, monkeypatch
):
    def busy_pass(b: object, c: object) -> PassReport:
        wakeup.request_pass()  # something changes during every pass
        return PassReport()

    monkeypatch.setattr(reconcile, "run_pass", busy_pass)
    reconcile.reconcile(backend)  # MAX_PASSES passes, then it gives the worker back
    client = reconcile.redis_client(settings.REDIS_URL)
    client.delete(reconcile.QUEUED_KEY)  # as the task queued during its passes starts
    queued.clear()
    reconcile.reconcile(backend)
    assert queued == [1]  # the change wanted after its last pass is not left to beat
