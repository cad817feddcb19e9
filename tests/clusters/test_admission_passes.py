"""Admission through real submit calls and reconcile passes on the local backend."""

from __future__ import annotations

import asyncio
import socket

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.models import Node
from jobs import lifecycle
from jobs.lifecycle.admit import plan_and_apply
from jobs.lifecycle.passes import run_pass
from jobs.lifecycle.report import PassReport
from jobs.models import Job, JobAttempt, Task
from jobs.news import queue_group_name
from jobs.states import JobState
from tests.clusters.helpers import cluster, job_text, vc
from tests.jobs.helpers import reconcile_until

pytestmark = pytest.mark.django_db(transaction=True)


def fresh(job: Job) -> Job:
    job.refresh_from_db()
    return job


def test_jobs_beyond_the_quota_wait_with_a_reason_and_a_position(alice, backend):
    cluster(cpu=8)
    vc("research", alice, cpu=2, max_capacity=0)  # borrows nothing
    jobs = [
        lifecycle.submit(alice, job_text(f"j{i}"), virtual_cluster="research") for i in range(4)
    ]
    run_pass(backend)
    states = [fresh(j).state for j in jobs]
    assert states == [JobState.RUNNING, JobState.RUNNING, JobState.WAITING, JobState.WAITING]
    assert jobs[2].reason == (
        "waiting for 1 CPU in 'research': 0 free, "
        "and 'research' may hold at most 0% of the cluster, no job ahead"
    )
    assert (jobs[3].queue_position, jobs[3].reason.endswith("1 job ahead")) == (2, True)


def test_users_of_one_vc_take_turns(alice, bob, backend):
    cluster(cpu=8)
    vc("research", alice, bob, cpu=2, max_capacity=0)
    alices = [
        lifecycle.submit(alice, job_text(f"a{i}"), virtual_cluster="research") for i in range(3)
    ]
    bobs = lifecycle.submit(bob, job_text("b"), virtual_cluster="research")
    run_pass(backend)
    states = [fresh(j).state for j in [*alices, bobs]]
    assert states == [JobState.RUNNING, JobState.WAITING, JobState.WAITING, JobState.RUNNING]
    assert (alices[1].queue_position, alices[2].queue_position) == (1, 2)


def test_a_job_waits_for_one_node_with_room_for_its_task(alice, backend):
    here = socket.gethostname()  # the node the local backend reports its tasks on
    Node.objects.create(name=here, cpu=4, memory_mb=64_000)
    Node.objects.create(name="small", cpu=1, memory_mb=64_000)
    first = lifecycle.submit(alice, job_text("a", cpu=2))
    run_pass(backend)
    assert fresh(first).state == JobState.RUNNING
    assert set(Task.objects.filter(attempt__job=first).values_list("node", flat=True)) == {here}
    wide = lifecycle.submit(alice, job_text("wide", cpu=3))  # 3 CPUs free, 2 on one node
    run_pass(backend)
    assert fresh(wide).state == JobState.WAITING
    assert wide.reason == (
        "waiting for a node with 3 CPU free for a task of 'main': the most on one node is "
        f"2 ({here}), no job ahead"
    )
    lifecycle.stop(first, alice)
    reconcile_until(backend, lambda: fresh(wide).state == JobState.RUNNING, timeout=40)


def test_a_finished_job_frees_its_quota_for_the_next(alice, backend):
    cluster(cpu=8)
    vc("research", alice, cpu=1, max_capacity=0)
    first = lifecycle.submit(alice, job_text("first", command="true"), virtual_cluster="research")
    second = lifecycle.submit(alice, job_text("second", command="true"), virtual_cluster="research")
    run_pass(backend)
    assert fresh(second).state == JobState.WAITING
    reconcile_until(backend, lambda: fresh(second).state != JobState.WAITING)
    assert fresh(first).state == JobState.SUCCEEDED


def test_a_borrowing_job_is_preempted_and_requeued_when_the_owner_needs_its_quota(
    alice, bob, backend
):
    cluster(cpu=2)
    vc("a", alice, cpu=1)
    vc("b", bob, cpu=1)
    borrower = lifecycle.submit(
        alice, job_text("big", cpu=2, opportunistic=True), virtual_cluster="a"
    )
    run_pass(backend)
    assert fresh(borrower).state == JobState.RUNNING and borrower.borrowing
    started = borrower.started_at
    assert started is not None

    owner = lifecycle.submit(bob, job_text("mine", command="sleep 1"), virtual_cluster="b")
    run_pass(backend)

    assert fresh(owner).state == JobState.RUNNING
    assert fresh(borrower).state == JobState.WAITING
    assert borrower.reason.startswith("preempted")
    first = JobAttempt.objects.get(job=borrower, number=0)
    assert first.state == JobState.STOPPED and first.reason.startswith("preempted: 'b' needed")
    assert borrower.events.filter(kind="preempted").exists()
    assert borrower.retries == 1  # OpenPAI retries a preempted framework: retryDetails.resource
    reconcile_until(backend, lambda: fresh(borrower).state == JobState.RUNNING, timeout=40)
    assert JobAttempt.objects.filter(job=borrower).count() == 2
    assert fresh(borrower).started_at == started  # its first start, kept
    lifecycle.stop(borrower, alice)


def test_a_vcs_guarantee_is_kept_against_default_jobs_filling_the_cluster(alice, bob, backend):
    """Issue 27's case: VC research guarantees 1 CPU of 2; default (no quota) fills the cluster
    with two 1-CPU jobs. Default was "unlimited and guaranteed", and the research job waited
    "0 free in the cluster" for as long as they ran. Now default is guaranteed what research
    does not (1 CPU), its second job borrows, and a research job runs within one pass while
    that borrower is preempted and requeued (its attempt stopped, retried as a resource
    retry)."""
    cluster(cpu=2)
    vc("research", bob, cpu=1)
    first = lifecycle.submit(alice, job_text("first", command="sleep 60"))
    second = lifecycle.submit(alice, job_text("second", command="sleep 60"))
    run_pass(backend)
    assert (fresh(first).state, fresh(second).state) == (JobState.RUNNING, JobState.RUNNING)
    assert (first.virtual_cluster.name, first.borrowing, second.borrowing) == (
        "default",
        False,
        True,
    )

    research = lifecycle.submit(
        bob, job_text("mine", command="sleep 1"), virtual_cluster="research"
    )
    run_pass(backend)

    assert fresh(research).state == JobState.RUNNING and not research.borrowing
    assert fresh(first).state == JobState.RUNNING  # within default's guarantee: never preempted
    assert fresh(second).state == JobState.WAITING and second.reason.startswith("preempted")
    attempt = JobAttempt.objects.get(job=second, number=0)
    assert attempt.state == JobState.STOPPED
    assert attempt.reason.startswith("preempted: 'research' needed")
    assert second.retries == 1
    for job, owner in ((first, alice), (second, alice), (research, bob)):
        lifecycle.stop(fresh(job), owner)


def test_a_pass_uses_the_same_number_of_queries_for_many_waiting_jobs(alice, backend):
    cluster(cpu=8)
    vc("research", alice, cpu=1, max_capacity=0)
    lifecycle.submit(alice, job_text("runs"), virtual_cluster="research")
    run_pass(backend)

    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            plan_and_apply(backend, PassReport())
        return len(queries)

    lifecycle.submit(alice, job_text("j0"), virtual_cluster="research")
    few = count()
    for i in range(1, 30):
        lifecycle.submit(alice, job_text(f"j{i}"), virtual_cluster="research")
    assert count() == few
    assert Job.objects.get(name="j29").queue_position == 30
    lifecycle.stop(Job.objects.get(name="runs"), alice)


def test_a_job_in_an_unlimited_virtual_cluster_waits_while_the_cluster_is_full(alice, bob, backend):
    cluster(cpu=2)
    vc("research", bob, cpu=2)
    busy = lifecycle.submit(bob, job_text("busy", cpu=2), virtual_cluster="research")
    run_pass(backend)
    waits = lifecycle.submit(alice, job_text("next", cpu=1))
    run_pass(backend)
    assert (fresh(busy).state, fresh(waits).state) == (JobState.RUNNING, JobState.WAITING)
    # research guarantees both CPUs: default's share is none, and none is idle to borrow
    assert (
        waits.reason
        == "waiting for 1 CPU in 'default': 0 free, not enough idle room to borrow, no job ahead"
    )
    lifecycle.stop(busy, bob)


def test_a_queue_whose_positions_move_is_told_once_and_one_that_stays_is_not(alice, backend):
    cluster(cpu=8)
    vc("research", alice, cpu=1, max_capacity=0)
    lifecycle.submit(alice, job_text("runs"), virtual_cluster="research")
    last = lifecycle.submit(alice, job_text("last"), virtual_cluster="research")
    run_pass(backend)
    assert fresh(last).queue_position == 1
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(queue_group_name("research"), channel)

    lifecycle.submit(alice, job_text("urgent", priority=5), virtual_cluster="research")
    report = run_pass(backend)

    assert fresh(last).queue_position == 2 and report.touched_queues == {"research"}
    message = async_to_sync(asyncio.wait_for)(layer.receive(channel), 5)
    assert message == {"type": "queue.changed"}
    assert run_pass(backend).touched_queues == set()  # nothing changed: no news
    lifecycle.stop(Job.objects.get(name="runs"), alice)
