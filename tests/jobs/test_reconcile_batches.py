"""A pass saves what it observed of many tasks in a constant number of queries, and never over
a change someone else made since it looked."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs import lifecycle
from jobs.lifecycle.admit import admit
from jobs.lifecycle.observe import save_changes, task_rows
from jobs.lifecycle.report import PassReport
from jobs.models import JobEvent, Task
from jobs.states import TaskState
from tests.jobs.samples import hello_job

pytestmark = pytest.mark.django_db


def waiting_tasks(user, backend, count: int, prefix: str) -> list:
    for n in range(count):
        lifecycle.submit(user, hello_job(name=f"{prefix}{n}"))
    admit(backend, PassReport())  # attempts and tasks, not launched
    tasks = Task.objects.filter(attempt__job__name__startswith=prefix)
    assert tasks.count() == count
    return task_rows(tasks)


def test_a_task_moved_since_it_was_observed_keeps_the_other_change(alice, backend):
    rows = waiting_tasks(alice, backend, 3, "moved")
    Task.objects.filter(id=rows[0].id).update(state=TaskState.STOPPED)  # a Stop got there first
    report = PassReport()
    save_changes([(row, {"state": TaskState.RUNNING, "ip": "10.0.0.9"}) for row in rows], report)
    states = dict(Task.objects.filter(id__in=[r.id for r in rows]).values_list("id", "state"))
    assert states[rows[0].id] == TaskState.STOPPED
    assert [states[r.id] for r in rows[1:]] == [TaskState.RUNNING, TaskState.RUNNING]
    assert report.changed_tasks == 2
    events = JobEvent.objects.filter(kind="task").values_list("message", flat=True)
    assert sorted(events) == ["main-0 running", "main-0 running"]


def test_the_queries_do_not_grow_with_the_number_of_changed_tasks(alice, backend):
    def queries_to_save(rows: list) -> int:
        changes = [
            (row, {"state": TaskState.FAILED, "exit_code": 1, "diagnostics": "exit 1"})
            if n % 2
            else (row, {"diagnostics": "Unschedulable: 0/3 nodes"})
            for n, row in enumerate(rows)
        ]
        with CaptureQueriesContext(connection) as queries:
            save_changes(changes, PassReport())
        return len(queries)

    few = queries_to_save(waiting_tasks(alice, backend, 3, "few"))
    many = queries_to_save(waiting_tasks(alice, backend, 30, "many"))
    assert few == many
