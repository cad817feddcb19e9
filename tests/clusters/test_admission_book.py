"""The admission book (``jobs.lifecycle.book``): what a process keeps between passes agrees with
a fresh read after every kind of move, a pass reads in full only the jobs that moved, and a
pass with nothing moved since one that changed nothing plans nothing."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from clusters.models import Node, VirtualCluster
from jobs import lifecycle, wakeup
from jobs.lifecycle import admit, book, feed
from jobs.lifecycle.admit import plan_and_apply
from jobs.lifecycle.book import BOOK, Book
from jobs.lifecycle.passes import run_pass
from jobs.lifecycle.report import PassReport
from jobs.models import Job, JobAttempt, Task
from jobs.states import JobState, TaskState
from tests.clusters.helpers import cluster, job_text, vc
from tests.jobs.helpers import reconcile_until

pytestmark = pytest.mark.django_db(transaction=True)


def agrees_with_a_fresh_read() -> None:
    """``BOOK``, brought up to date, holds what a book made now reads."""
    BOOK.refresh(None)
    fresh = Book()
    fresh.refresh(None)
    kept, read = BOOK.loaded(), fresh.loaded()
    assert sorted(kept.waiting, key=lambda w: w.id) == sorted(read.waiting, key=lambda w: w.id)
    assert sorted(kept.running, key=lambda r: r.id) == sorted(read.running, key=lambda r: r.id)
    assert kept.standing == read.standing
    assert (kept.capacity, kept.nodes) == (read.capacity, read.nodes)


def research_jobs(owner, *names: str) -> list[Job]:
    """Jobs ``names`` of ``owner`` in VC ``research`` (one CPU guaranteed, nothing to borrow)
    on an 8-CPU cluster: the first runs, the others wait."""
    cluster(cpu=8)
    vc("research", owner, cpu=1, max_capacity=0)
    return [lifecycle.submit(owner, job_text(n), virtual_cluster="research") for n in names]


def test_the_book_agrees_with_a_fresh_read_after_every_kind_of_move(alice, backend):
    cluster(cpu=2)
    vc("research", alice, cpu=1)
    first = lifecycle.submit(alice, job_text("first"))
    second = lifecycle.submit(alice, job_text("second"))
    run_pass(backend)  # both run; the second borrows what research guarantees
    second.refresh_from_db()
    assert second.borrowing
    agrees_with_a_fresh_read()
    assert BOOK.running[second.id].borrowing

    ours = lifecycle.submit(alice, job_text("ours"), virtual_cluster="research")
    agrees_with_a_fresh_read()  # a new job: read in full
    assert set(BOOK.waiting) == {ours.id}
    run_pass(backend)  # research reclaims: the borrower goes back to the queue
    second.refresh_from_db()
    assert second.state == JobState.WAITING
    agrees_with_a_fresh_read()
    assert BOOK.waiting[second.id].preempted and second.id in BOOK.read_in_full

    Job.objects.filter(id=ours.id).update(retries=1)  # a retry: a new attempt, other nodes
    agrees_with_a_fresh_read()
    assert BOOK.read_in_full == {ours.id}

    lifecycle.stop(first, alice)  # RUNNING -> STOPPING, then gone once it stopped
    agrees_with_a_fresh_read()
    reconcile_until(backend, lambda: first.id not in BOOK.running and first.id not in BOOK.marks)
    agrees_with_a_fresh_read()


def test_a_pass_reads_in_full_only_the_jobs_that_moved(alice):
    jobs = research_jobs(alice, "j0", "j1", "j2", "j3", "j4")
    BOOK.refresh(None)
    assert {j.id for j in jobs} <= BOOK.read_in_full
    BOOK.refresh(None)
    assert BOOK.read_in_full == set()  # nothing moved
    lifecycle.stop(jobs[0], alice)  # a waiting job stops at once: it leaves the book
    late = lifecycle.submit(alice, job_text("late"), virtual_cluster="research")
    assert BOOK.refresh(None)
    assert BOOK.read_in_full == {late.id}
    assert set(BOOK.waiting) == {j.id for j in jobs[1:]} | {late.id}


def test_a_pass_with_nothing_moved_plans_nothing(alice, backend, monkeypatch):
    research_jobs(alice, "j0", "j1", "j2")  # one runs, two wait for research's one CPU
    plans = []
    real = admit.plan

    def counted(*args, **kwargs):
        plans.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(admit, "plan", counted)
    plan_and_apply(backend, PassReport())  # starts one
    plan_and_apply(backend, PassReport())  # the job it started moved: planned again
    assert len(plans) == 2
    plan_and_apply(backend, PassReport())
    plan_and_apply(backend, PassReport(), standing=False)
    assert len(plans) == 2  # nothing moved since a pass that changed nothing
    Node.objects.update(cpu=16)  # the cluster grew: a decision input moved
    plan_and_apply(backend, PassReport(), standing=False)
    assert len(plans) == 3
    plan_and_apply(backend, PassReport())  # the last pass told no job where it stands
    assert len(plans) == 4


def waiting_standing_reads(queries) -> list[str]:
    """The reads of every waiting job's (reason, position) among ``queries``."""
    read = '"jobs_job"."queue_position" AS "queue_position" FROM "jobs_job" WHERE'
    return [q["sql"] for q in queries if read in q["sql"]]


def test_a_pass_trusts_the_standing_it_wrote_until_another_process_writes_it(alice, backend):
    jobs = research_jobs(alice, "j0", "j1", "j2")
    plan_and_apply(backend, PassReport())  # starts j0, tells j1 and j2 where they stand
    told = dict(Job.objects.filter(id__in=[j.id for j in jobs[1:]]).values_list("id", "reason"))
    assert all(reason.startswith("waiting for 1 CPU in 'research'") for reason in told.values())
    with CaptureQueriesContext(connection) as queries:
        plan_and_apply(backend, PassReport())  # j0 moved (it runs): planned again
    assert waiting_standing_reads(queries) == []  # what it wrote is remembered, not read

    # Another process's pass wrote j1's standing (its stamp first): this one reads it back and
    # sets it right, where trusting what it remembers would leave the other's text.
    Job.objects.filter(id=jobs[1].id).update(reason="as another process wrote it")
    assert wakeup.stamp_standing("another process")
    lifecycle.submit(alice, job_text("late"), virtual_cluster="research")  # something moved
    with CaptureQueriesContext(connection) as queries:
        plan_and_apply(backend, PassReport())
    assert len(waiting_standing_reads(queries)) == 1
    jobs[1].refresh_from_db()
    assert jobs[1].reason == told[jobs[1].id]
    agrees_with_a_fresh_read()


def test_a_pass_that_cannot_stamp_the_standing_does_not_write_it(alice, backend, monkeypatch):
    research_jobs(alice, "j0", "j1")
    monkeypatch.setattr(wakeup, "stamp_standing", lambda stamp: False)  # Redis unreachable
    report = PassReport()
    plan_and_apply(backend, report)
    assert report.admitted == 1  # the pass still starts what fits
    assert not BOOK.settled  # a later pass tells them
    assert Job.objects.get(name="j1").reason == "waiting to be admitted"  # not written


def full_mark_reads(queries) -> list[str]:
    """The reads of every live job's mark among ``queries`` (what the feed spares)."""
    read = '"jobs_job"."virtual_cluster_id" FROM "jobs_job" WHERE "jobs_job"."state" IN'
    return [q["sql"] for q in queries if read in q["sql"]]


def test_a_pass_reads_the_rows_changed_since_the_last_one_not_every_live_job(alice):
    jobs = research_jobs(alice, "j0", "j1", "j2")
    BOOK.refresh(None)
    Job.objects.filter(id=jobs[1].id).update(retries=1)
    with CaptureQueriesContext(connection) as queries:
        BOOK.refresh(None)
    assert full_mark_reads(queries) == []
    assert BOOK.read_in_full == {jobs[1].id}
    Job.objects.filter(id=jobs[2].id).update(reason="rewritten")  # not what admission reads
    assert wakeup.stamp_standing("another process")  # as another process's pass would
    BOOK.refresh(None)
    assert BOOK.read_in_full == set()
    agrees_with_a_fresh_read()


def test_a_change_committed_after_a_pass_read_the_changes_is_seen_by_the_next_pass(alice):
    """A transaction that was running when a pass read the changes commits after it: its
    change is older than the pass's read, and the next pass still sees it (the horizon is the
    oldest running transaction, not the newest change seen)."""
    (early,) = research_jobs(alice, "early")
    BOOK.refresh(None)
    other = connections.create_connection("default")
    try:
        other.set_autocommit(False)
        with other.cursor() as cursor:
            cursor.execute("UPDATE jobs_job SET retries = 2 WHERE id = %s", [early.id])
        late = lifecycle.submit(alice, job_text("late"), virtual_cluster="research")
        BOOK.refresh(None)  # sees the late job, not the uncommitted retry
        assert BOOK.read_in_full == {late.id}
        assert BOOK.marks[early.id][1] == 0
        other.commit()
    finally:
        other.close()
    BOOK.refresh(None)
    assert BOOK.read_in_full == {early.id}
    assert BOOK.marks[early.id][1] == 2
    agrees_with_a_fresh_read()


def test_a_live_job_deleted_under_the_book_leaves_it(alice, backend):
    """A deleted row leaves no stamp: the statement that deleted it counts itself, and the
    next pass reads everything."""
    gone, kept = research_jobs(alice, "gone", "kept")
    run_pass(backend)
    BOOK.refresh(None)
    assert gone.id in BOOK.running
    BOOK.refresh(None)
    assert BOOK.since is not None  # the next pass would read the changes only
    Job.objects.filter(id=gone.id).delete()  # its tasks with it
    BOOK.refresh(None)
    assert gone.id not in BOOK.running and gone.id not in BOOK.marks
    assert kept.id in BOOK.waiting
    agrees_with_a_fresh_read()


def test_what_a_pass_read_inside_a_rolled_back_transaction_is_read_again(alice):
    (job,) = research_jobs(alice, "j")
    BOOK.refresh(None)
    with pytest.raises(RuntimeError), transaction.atomic():
        Job.objects.filter(id=job.id).update(retries=3)
        BOOK.refresh(None)
        assert BOOK.marks[job.id][1] == 3
        raise RuntimeError("rolled back")
    BOOK.refresh(None)
    assert BOOK.marks[job.id][1] == 0
    agrees_with_a_fresh_read()


def test_a_stamp_restored_from_another_database_is_not_news(alice):
    """A dump restored into another cluster keeps stamps that may lie ahead of the new
    cluster's transaction ids: read as changed, those rows would be read on every pass."""
    restored, kept = research_jobs(alice, "restored", "moved")
    with connection.cursor() as cursor:  # the trigger stamps only what admission reads
        cursor.execute("UPDATE jobs_job SET changed = '999999999999' WHERE id = %s", [restored.id])
    since = feed.position()
    Job.objects.filter(id=kept.id).update(retries=1)
    assert since is not None
    assert [row[0] for row in feed.jobs_since(since[0])] == [kept.id]


def test_a_job_in_a_vc_made_after_a_pass_read_the_vcs_is_read_by_the_next(alice, monkeypatch):
    research_jobs(alice, "first")
    BOOK.refresh(None)
    vc("late", alice, cpu=1)
    late = lifecycle.submit(alice, job_text("late"), virtual_cluster="late")
    every = VirtualCluster.objects.all
    before = SimpleNamespace(all=lambda: [v for v in every() if v.name != "late"])
    monkeypatch.setattr(book.VirtualCluster, "objects", before)  # read before it was made
    BOOK.refresh(None)
    assert late.id not in BOOK.waiting
    monkeypatch.undo()
    BOOK.refresh(None)  # the feed does not bring the job again: the book remembers it
    assert late.id in BOOK.waiting
    agrees_with_a_fresh_read()


def test_where_running_tasks_are_agrees_with_a_fresh_read_as_they_move_and_end(alice):
    """On two or more nodes, the book places each running job by its live tasks, worked out
    again only for a job whose tasks moved since the last pass."""
    for name in ("n2", "n3"):
        Node.objects.create(name=name, cpu=8, memory_mb=64_000)
    here, there = research_jobs(alice, "here", "there")  # and node-1
    Job.objects.filter(id__in=[here.id, there.id]).update(state=JobState.RUNNING)
    tasks = {}
    for job in (here, there):
        attempt = JobAttempt.objects.create(job=job, number=0, key=f"k{job.id}")
        tasks[job.id] = Task.objects.create(attempt=attempt, role="main", index=0)
    agrees_with_a_fresh_read()
    assert BOOK.placed[here.id].unplaced  # a pending pod: on no node yet

    def on(job: Job, **change: object) -> dict[str, object]:
        Task.objects.filter(id=tasks[job.id].id).update(**change)
        agrees_with_a_fresh_read()
        return {node: use.cpu for node, use in BOOK.placed[job.id].placed.items()}

    assert on(here, node="n2") == {"n2": 1}
    assert on(there, node="n2") == {"n2": 1}
    assert on(here, node="node-1") == {"node-1": 1}  # moved: placed again
    assert on(there, state=TaskState.SUCCEEDED) == {}  # its task ended: holds nothing
    assert BOOK.placed[there.id].unplaced == ()
    Node.objects.filter(name="node-1").delete()  # lost with the task on it
    agrees_with_a_fresh_read()
    assert BOOK.loaded().capacity.cpu == 16
    assert BOOK.placed[here.id].unplaced  # no longer on a node the cluster has
