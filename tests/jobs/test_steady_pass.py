"""The pass that runs once per job on a full cluster: a task has ended, its job is settled and
the next waiting job starts in its room. It bounds how many jobs a second the portal runs
(bench/e2e.py, one job per CPU), so what it sends is counted here."""

from __future__ import annotations

import socket
from dataclasses import replace

import pytest
from django.db import connection

from backends.base import TaskPhase
from bench._queries import recorded
from clusters import capacity
from jobs import lifecycle
from jobs.lifecycle.passes import run_pass
from jobs.models import Job, JobEvent, Task
from jobs.states import JobState, TaskState
from tests.clusters.helpers import job_text
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_job_ends_and_the_next_starts_in_one_pass_without_settling_it(
    alice, backend, monkeypatch
):
    monkeypatch.setattr(
        capacity, "backend_nodes", lambda b: {"local": replace(b.capacity(), cpu=2)}
    )
    ends = lifecycle.submit(alice, job_text("ends", command="true"))
    lifecycle.submit(alice, job_text("runs", command="sleep 30"))
    run_pass(backend)  # both start: the cluster is full
    waits = lifecycle.submit(alice, job_text("waits", command="sleep 30"))
    ref = Task.objects.get(attempt__job=ends).backend_ref
    wait_for(lambda: backend.observe([ref])[ref].phase == TaskPhase.SUCCEEDED)

    with recorded(connection) as statements:
        report = run_pass(backend, {ref})

    assert Job.objects.get(id=ends.id).state == JobState.SUCCEEDED
    started = Task.objects.get(attempt__job=waits)
    assert (started.state, started.node) == (TaskState.RUNNING, socket.gethostname())
    assert started.started_at is not None
    assert JobEvent.objects.filter(job=waits, kind="task", message="main-0 running").exists()
    assert report.launched == 1
    # The job that started has nothing to settle: running attempts are read once, for the job
    # that ended. Each task's change is one plain UPDATE, and a started job's last attempt
    # is read with the job itself.
    attempt_reads = [s for s in statements if s.startswith('SELECT "jobs_jobattempt"."id"')]
    assert len(attempt_reads) == 1
    assert not [s for s in statements if s.startswith('UPDATE "jobs_task"') and "CASE" in s]
    assert not [s for s in statements if "MAX(" in s]
    # The local backend has started the task when its launch returns: saved RUNNING with its
    # ref, not observed and locked again; only the task that ended is.
    task_locks = [s for s in statements if 'FROM "jobs_task"' in s and "FOR UPDATE" in s]
    assert len(task_locks) == 1
    # A new attempt's tasks are all waiting: their placements (the environment's peers) come
    # from the launch's own read of them, not a second one.
    placement_reads = [s for s in statements if s.startswith('SELECT "jobs_task"."attempt_id"')]
    assert not placement_reads
    assert len(statements) <= 29
