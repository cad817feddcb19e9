"""``GET /api/v2/jobs/<user~job>/usage``: each task's usage samples, its limits and warnings,
the job metrics OpenPAI's portal charted per task; owner and admins only, as the logs."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import JobAttempt, Task, TaskUsage
from tests.api.helpers import client_for, job_with_tasks

pytestmark = pytest.mark.django_db
USAGE = "/api/v2/jobs/alice~hello/usage"
MB = 1024 * 1024


def sampled_job(owner):
    job = job_with_tasks(owner)
    task = Task.objects.get(attempt__job=job)
    now = timezone.now()
    TaskUsage.objects.bulk_create(
        TaskUsage(task=task, time=now - timedelta(seconds=5 * (3 - i)), cpu=c, memory_bytes=m)
        for i, (c, m) in enumerate([(None, 50 * MB), (0.5, 100 * MB), (0.75, 120 * MB)])
    )
    return job, now


def test_the_owner_reads_each_tasks_points_and_its_memory_limit(alice):
    sampled_job(alice)
    response = client_for(alice).get(USAGE)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["attempt"] == 0
    assert body["fields"] == ["time", "cpu", "memoryMB", "gpuUtil", "gpuMemoryMB"]
    (task,) = body["tasks"]
    assert (task["taskRole"], task["taskIndex"], task["state"]) == ("main", 0, "RUNNING")
    assert (task["memoryMB"], task["cpu"], task["gpu"]) == (128, 1, 0)
    assert [p[1:] for p in task["points"]] == [
        [None, 50.0, None, None],
        [0.5, 100.0, None, None],
        [0.75, 120.0, None, None],
    ]
    times = [p[0] for p in task["points"]]
    assert times == sorted(times) and all(isinstance(t, int) for t in times)
    assert [w["kind"] for w in task["warnings"]] == ["nearMemoryLimit"]  # 120 of 128 MB


def test_an_admin_reads_it_and_another_user_gets_404_as_for_the_logs(alice, bob, admin):
    sampled_job(alice)
    assert client_for(admin).get(USAGE).status_code == 200
    logs = client_for(bob).get("/api/v2/jobs/alice~hello/attempts/0/tasks/main-0/logs/stdout")
    assert client_for(bob).get(USAGE).status_code == logs.status_code == 404
    assert client_for(None).get(USAGE).status_code in (401, 403)


def test_an_older_attempt_is_chosen_by_number_and_a_bad_one_is_named(alice):
    job, _ = sampled_job(alice)
    JobAttempt.objects.create(job=job, number=1, key=f"k1-{job.id}")
    client = client_for(alice)
    latest = client.get(USAGE).json()
    assert latest["attempt"] == 1 and latest["tasks"] == []
    first = client.get(f"{USAGE}?attempt=0").json()
    assert len(first["tasks"][0]["points"]) == 3
    bad = client.get(f"{USAGE}?attempt=first")
    assert bad.status_code == 400
    assert "attempt" in bad.json()["message"]
    assert client.get(f"{USAGE}?attempt=7").status_code == 404


def test_an_ended_task_keeps_its_points_and_has_no_warning(alice):
    job, _ = sampled_job(alice)
    Task.objects.filter(attempt__job=job).update(state="SUCCEEDED")
    (task,) = client_for(alice).get(USAGE).json()["tasks"]
    assert len(task["points"]) == 3 and task["warnings"] == []
