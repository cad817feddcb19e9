"""Events drive the reconcile loop: a local task's end wakes it through the wrapper's file and
the listener, a wake-up applies what changed and uses the freed capacity at once, and what a
dying worker did not apply is kept for the next pass. Beat plays no part here."""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest
from celery import current_app
from django.core.cache import cache
from django.db import connection, connections

from backends.ended import ENDED_DIR
from backends.local import LocalBackend
from clusters import capacity
from jobs import lifecycle, news, wakeup
from jobs.lifecycle import admit, passes
from jobs.lifecycle.report import PassReport
from jobs.models import Job, JobEvent, Task
from jobs.states import JobState, TaskState
from tests.clusters.helpers import job_text, vc
from tests.support.servers import reconcile_worker_and_listener

pytestmark = pytest.mark.django_db(transaction=True)
SEND_RECONCILE = wakeup.send_reconcile  # the real one (tests replace it with a no-op)


@pytest.fixture
def clean_keys() -> Iterator[None]:
    client = wakeup.redis_client(wakeup.settings.REDIS_URL)
    keys = [wakeup.CHANGED_KEY, wakeup.QUEUED_KEY, wakeup.WANTED_KEY, wakeup.LOCK_NAME]
    keys += [wakeup.FULL_KEY, wakeup.LATER_KEY]
    client.delete(*keys)
    yield
    client.delete(*keys)


def fresh(job: Job) -> Job:
    job.refresh_from_db()
    return job


def wait_until(predicate: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.05)


def ended_and_recorded(backend: LocalBackend, job: Job) -> str:
    """Wait for ``job``'s task to end on the backend; record it as changed (as the listener
    does); its ref."""
    wait_until(lambda: Task.objects.filter(attempt__job=job).exclude(backend_ref="").exists())
    ref = Task.objects.get(attempt__job=job).backend_ref
    wait_until(lambda: (backend.root / ref / "exit_code").exists())
    wakeup.tasks_changed([ref])
    return ref


def test_a_tasks_end_is_applied_and_the_next_job_started_without_beat(
    alice, backend, clean_keys, monkeypatch
):
    """Through the real parts: the wrapper's file, ``watchcluster``, the broker and a worker.
    No pass runs in this process and no beat runs at all."""
    monkeypatch.setattr(wakeup, "send_reconcile", SEND_RECONCILE)
    vc("solo", alice, cpu=1, max_capacity=0)  # room for one job at a time: it borrows none
    with reconcile_worker_and_listener():
        first = lifecycle.submit(
            alice, job_text("first", command="sleep 1"), virtual_cluster="solo"
        )
        second = lifecycle.submit(alice, job_text("second", command="true"), virtual_cluster="solo")
        wait_until(lambda: fresh(first).state == JobState.RUNNING)
        assert fresh(second).state == JobState.WAITING  # it did not fit beside the first
        if backend.firewall.active:  # the worker fences its task in the tests' own table
            table = ["nft", "list", "table", "inet", backend.firewall.config.table]
            wait_until(lambda: subprocess.run(table, capture_output=True).returncode == 0, 10)
        wait_until(lambda: fresh(second).is_final)
    assert fresh(first).state == JobState.SUCCEEDED
    assert fresh(second).state == JobState.SUCCEEDED
    assert not any((backend.root / ENDED_DIR).iterdir())  # every end was handed over


def worker_sessions(app_name: str) -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s", [app_name])
        return {row[0] for row in cursor.fetchall()}


def no_pass_due() -> bool:
    client = wakeup.redis_client(wakeup.settings.REDIS_URL)
    return not client.exists(wakeup.QUEUED_KEY, wakeup.WANTED_KEY, wakeup.LOCK_NAME)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's sessions are seen")
def test_the_worker_keeps_its_database_connection_between_passes_and_replaces_a_lost_one(
    alice, backend, clean_keys, monkeypatch
):
    """Celery's Django fixup closed the worker's connection pool after every task, so that each
    pass connected anew (celery/celery#10554); the worker ``runportal`` starts keeps it. A
    connection the server ends meanwhile is replaced (CONN_HEALTH_CHECKS), not a failed pass."""
    monkeypatch.setattr(wakeup, "send_reconcile", SEND_RECONCILE)
    app_name = f"portal-worker-{uuid.uuid4().hex[:12]}"  # libpq names the worker's sessions
    with reconcile_worker_and_listener(PGAPPNAME=app_name):
        for name in ("first", "second"):
            job = lifecycle.submit(alice, job_text(name, command="true"))
            wait_until(lambda job=job: fresh(job).is_final)
            assert fresh(job).state == JobState.SUCCEEDED
            wait_until(no_pass_due)
            time.sleep(0.5)  # the task's end (where the fixup closed the pool) is past
            kept = worker_sessions(app_name)
            assert kept, "the worker holds no connection once its passes are over"
            with connection.cursor() as cursor:
                for pid in kept:  # the next job's passes find them gone
                    cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
            wait_until(lambda: not worker_sessions(app_name))


def test_a_wake_up_settles_the_ended_job_and_launches_the_next_in_the_same_pass(
    alice, backend, clean_keys
):
    vc("solo", alice, cpu=1, max_capacity=0)
    first = lifecycle.submit(alice, job_text("first", command="true"), virtual_cluster="solo")
    second = lifecycle.submit(alice, job_text("second", command="sleep 30"), virtual_cluster="solo")
    passes.reconcile(backend)
    ended_and_recorded(backend, first)

    report = passes.reconcile(backend)  # a wake-up, not beat's full pass

    assert fresh(first).state == JobState.SUCCEEDED
    assert fresh(second).state == JobState.RUNNING
    assert report.launched == 1
    assert wakeup.changed_tasks() == {}  # applied, so forgotten


def test_a_finished_jobs_news_goes_out_before_the_pass_launches_the_next(
    alice, backend, clean_keys, monkeypatch
):
    """A page (or a client waiting for the job) hears of its end before the pass goes on to
    admit and launch, and hears it once."""
    vc("solo", alice, cpu=1, max_capacity=0)
    first = lifecycle.submit(alice, job_text("first", command="true"), virtual_cluster="solo")
    second = lifecycle.submit(alice, job_text("second", command="sleep 30"), virtual_cluster="solo")
    passes.reconcile(backend)
    ended_and_recorded(backend, first)
    published: list[int] = []
    heard_before_launch: list[int] = []
    real_publish, real_launch = news.publish, passes.launch

    def counting(job_ids, queues=(), finished=False):  # type: ignore[no-untyped-def]
        published.extend(job_ids)
        real_publish(job_ids, queues, finished)

    def launching(*args):  # type: ignore[no-untyped-def]
        heard_before_launch.extend(published)
        return real_launch(*args)

    monkeypatch.setattr(news, "publish", counting)
    monkeypatch.setattr(passes, "launch", launching)
    passes.reconcile(backend)

    assert (fresh(first).state, fresh(second).state) == (JobState.SUCCEEDED, JobState.RUNNING)
    assert heard_before_launch == [first.id]
    assert sorted(published) == sorted([first.id, second.id])  # each once


def test_a_wake_up_observes_only_the_tasks_that_changed(alice, backend, clean_keys, monkeypatch):
    busy = lifecycle.submit(alice, job_text("busy", command="sleep 30"))
    quick = lifecycle.submit(alice, job_text("quick", command="sleep 1"))
    passes.run_pass(backend)
    assert Task.objects.get(attempt__job=quick).state == TaskState.RUNNING
    ref = ended_and_recorded(backend, quick)
    asked: list[list[str]] = []
    real_observe = backend.observe
    monkeypatch.setattr(backend, "observe", lambda refs: asked.append(refs) or real_observe(refs))

    passes.reconcile(backend)

    assert asked == [[ref]]
    assert fresh(quick).state == JobState.SUCCEEDED
    assert fresh(busy).state == JobState.RUNNING


def race(runs: list[Callable[[], object]]) -> None:
    """Each of ``runs`` in a thread of its own, all let go at once."""
    start = threading.Barrier(len(runs))

    def worker(run: Callable[[], object]) -> None:
        try:
            start.wait()
            run()
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(run,)) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)


def raced_job(alice: object, backend: LocalBackend) -> tuple[Job, str]:
    job = lifecycle.submit(alice, job_text("raced", command="sleep 1"))
    passes.run_pass(backend)
    assert Task.objects.get(attempt__job=job).state == TaskState.RUNNING
    return job, ended_and_recorded(backend, job)


def assert_applied_once(job: Job) -> None:
    assert fresh(job).state == JobState.SUCCEEDED
    events = list(JobEvent.objects.filter(job=job).values_list("kind", "message"))
    assert ("task", "main-0 succeeded") in events
    assert len(events) == len(set(events))  # every change of state recorded once


def test_two_workers_racing_on_the_same_event_apply_it_once(
    alice, backend, clean_keys, monkeypatch
):
    job, _ = raced_job(alice, backend)
    published: list[int] = []
    real_publish = news.publish

    def counting(job_ids, queues=(), finished=False):  # type: ignore[no-untyped-def]
        published.extend(job_ids)
        real_publish(job_ids, queues, finished)

    monkeypatch.setattr(news, "publish", counting)
    race([lambda: passes.reconcile(backend)] * 3)  # three reconcile tasks, one event
    assert_applied_once(job)
    assert published.count(job.id) == 1


def test_passes_racing_past_the_lock_still_change_nothing_twice(alice, backend, clean_keys):
    """The compare-and-swap updates alone: bare passes, no lock. (The job's pages may hear
    of it twice here, once for the task's end and once for the job's, when two passes each
    apply one of them; the lock keeps workers from that.)"""
    job, ref = raced_job(alice, backend)
    race([lambda: passes.run_pass(backend, {ref})] * 3 + [lambda: passes.run_pass(backend)])
    assert_applied_once(job)


def test_an_event_a_dying_worker_did_not_apply_is_applied_by_the_next_wake_up(
    alice, backend, clean_keys, monkeypatch
):
    job = lifecycle.submit(alice, job_text("survivor", command="sleep 1"))
    passes.run_pass(backend)
    assert Task.objects.get(attempt__job=job).state == TaskState.RUNNING
    ref = ended_and_recorded(backend, job)

    def die(*args: object) -> None:
        raise SystemExit("the worker was killed mid-pass")

    monkeypatch.setattr(passes, "settle", die)  # dies after saving the task's end
    with pytest.raises(SystemExit):
        passes.reconcile(backend)
    monkeypatch.undo()
    assert Task.objects.get(attempt__job=job).state == TaskState.SUCCEEDED
    assert fresh(job).state == JobState.RUNNING
    assert ref in wakeup.changed_tasks()  # kept: nobody applied it

    passes.reconcile(backend)  # any later wake-up, e.g. the next submission's

    assert fresh(job).state == JobState.SUCCEEDED
    assert wakeup.changed_tasks() == {}


def test_an_event_named_again_during_a_pass_is_kept_for_the_next(clean_keys):
    wakeup.tasks_changed(["a/main-0", "b/main-0"])
    read = wakeup.changed_tasks()
    wakeup.tasks_changed(["a/main-0"])  # a new event for it while the pass ran
    wakeup.forget_changed(read)
    assert set(wakeup.changed_tasks()) == {"a/main-0"}


def test_a_task_that_ends_while_a_pass_settles_another_is_settled_and_replaced_by_that_pass(
    alice, backend, clean_keys, monkeypatch
):
    """At one job per CPU a trivial task ends while the pass after its launch settles the task
    before it: taken in before the pass admits, both jobs end and both waiting jobs start in
    that one pass, instead of one job a pass (``passes.take_in_more``)."""
    monkeypatch.setattr(
        capacity, "backend_nodes", lambda b: {"local": replace(b.capacity(), cpu=2)}
    )
    first = lifecycle.submit(alice, job_text("first", command="true"))
    second = lifecycle.submit(alice, job_text("second", command="true"))
    third = lifecycle.submit(alice, job_text("third", command="sleep 30"))
    fourth = lifecycle.submit(alice, job_text("fourth", command="sleep 30"))
    passes.reconcile(backend)  # the first two start: the cluster is full
    ended_and_recorded(backend, first)
    wait_until(lambda: Task.objects.filter(attempt__job=second).exclude(backend_ref="").exists())
    second_ref = Task.objects.get(attempt__job=second).backend_ref
    wait_until(lambda: (backend.root / second_ref / "exit_code").exists())
    settling, ran = passes.settle, []

    def settle_as_the_second_ends(*args: object) -> None:
        settling(*args)
        if not ran:  # the listener records the second's end while the pass settles the first
            wakeup.tasks_changed([second_ref])
        ran.append(1)

    monkeypatch.setattr(passes, "settle", settle_as_the_second_ends)
    running = passes.run_pass
    counted: list[int] = []
    monkeypatch.setattr(passes, "run_pass", lambda *a, **k: counted.append(1) or running(*a, **k))

    report = passes.reconcile(backend)

    assert counted == [1]
    assert report.launched == 2
    assert [fresh(job).state for job in (first, second)] == [JobState.SUCCEEDED] * 2
    assert [fresh(job).state for job in (third, fourth)] == [JobState.RUNNING] * 2
    assert wakeup.changed_tasks() == {}
    assert not wakeup.still_wanted()


def test_with_no_job_waiting_a_pass_leaves_what_ends_meanwhile_to_the_next(
    alice, backend, clean_keys, monkeypatch
):
    """With room to spare, the ends that come during a pass are not worth a second observe and
    settle in it: the next pass takes them in one batch."""
    job = lifecycle.submit(alice, job_text("alone", command="true"))
    passes.reconcile(backend)
    ended_and_recorded(backend, job)
    monkeypatch.setattr(wakeup, "claim_more", lambda claimed: pytest.fail("took in more"))
    passes.reconcile(backend)
    assert fresh(job).state == JobState.SUCCEEDED


def test_what_a_pass_takes_in_mid_pass_is_what_was_named_since_it_began(clean_keys):
    assert wakeup.claim_more({}) is None  # nothing asked: nothing to take in
    wakeup.tasks_changed(["a/main-0", "b/main-0"])
    _, claimed = wakeup.claim()
    wakeup.tasks_changed(["a/main-0", "c/main-0"])  # a named again, c new
    more = wakeup.claim_more(claimed)
    assert more is not None and set(more) == {"a/main-0", "c/main-0"}
    assert not wakeup.still_wanted()  # claimed: this pass serves it
    wakeup.forget_changed({**claimed, **more})
    assert wakeup.changed_tasks() == {}


def test_a_pass_whose_redis_stops_answering_mid_pass_goes_on_with_what_it_claimed(
    clean_keys, settings
):
    wakeup.tasks_changed(["a/main-0"])
    _, claimed = wakeup.claim()
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    assert wakeup.claim_more(claimed) is None


def test_a_full_pass_asked_for_mid_pass_is_left_for_the_next(clean_keys):
    wakeup.tasks_changed(["a/main-0"])
    _, claimed = wakeup.claim()
    wakeup.request_full_pass()  # the watch lost track of the tasks
    assert wakeup.claim_more(claimed) is None
    assert wakeup.still_wanted()
    assert wakeup.claim()[0]  # and the next pass is a full one


def test_beats_pass_left_to_a_running_pass_is_done_by_it(backend, clean_keys, monkeypatch):
    kinds: list[bool] = []
    monkeypatch.setattr(
        passes, "run_pass", lambda b, c, take_more: kinds.append(c is None) or PassReport()
    )
    with wakeup.reconcile_lock():
        assert passes.reconcile(backend, full=True).skipped  # beat's task found one running
    passes.reconcile(backend)  # the running task goes round again: "wanted"
    assert kinds == [True]


def test_queue_positions_a_wake_up_leaves_unwritten_are_written_by_a_pass_it_asks_for(
    alice, backend, clean_keys, monkeypatch
):
    vc("solo", alice, cpu=1, max_capacity=0)
    first = lifecycle.submit(alice, job_text("first", command="sleep 1"), virtual_cluster="solo")
    second = lifecycle.submit(alice, job_text("second", command="sleep 30"), virtual_cluster="solo")
    third = lifecycle.submit(alice, job_text("third", command="sleep 30"), virtual_cluster="solo")
    passes.run_pass(backend)
    assert (fresh(second).queue_position, fresh(third).queue_position) == (1, 2)
    ended_and_recorded(backend, first)
    later: list[float | None] = []
    monkeypatch.setattr(wakeup, "send_reconcile", lambda countdown=None: later.append(countdown))
    cache.set(admit.STANDING_KEY, 1, 60)  # positions were written a moment ago

    passes.reconcile(backend)  # the wake-up starts the second job, leaves positions

    assert fresh(second).state == JobState.RUNNING
    assert fresh(third).queue_position == 2  # not written yet
    assert later == [admit.STANDING_EVERY_SECONDS]
    cache.delete(admit.STANDING_KEY)  # that second is over: the pass asked for runs
    passes.reconcile(backend)
    assert fresh(third).queue_position == 1


def test_with_always_eager_a_submission_runs_its_pass_in_place(
    alice, backend, clean_keys, monkeypatch
):
    """CELERY_TASK_ALWAYS_EAGER (no worker): the task sent by name still runs, here."""
    monkeypatch.setattr(wakeup, "send_reconcile", SEND_RECONCILE)
    current_app.conf.task_always_eager = True
    try:
        job = lifecycle.submit(alice, job_text("eager", command="sleep 30"))
    finally:
        current_app.conf.task_always_eager = False
    assert fresh(job).state == JobState.RUNNING
