"""``GET /api/v2/kubernetes/pods`` (the live tasks as pods, on the local backend too) and
``GET /api/v2/alerts`` (tasks killed for memory, jobs waiting long, nodes and the backend)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from backends.base import BackendUnavailable
from clusters.models import Node
from jobs import exitspec, lifecycle
from jobs.models import Job, Task
from jobs.states import TaskState
from tests.api.helpers import client_for, job_with_tasks
from tests.jobs.helpers import reconcile_until, settle
from tests.runtime.jobs import one_role

PODS = "/api/v2/kubernetes/pods"
ALERTS = "/api/v2/alerts"


@pytest.mark.django_db(transaction=True)
def test_an_admin_lists_the_running_tasks_of_the_local_backend_as_pods(alice, admin, backend):
    job = lifecycle.submit(alice, one_role("sleeper", ["sleep 30"]))
    reconcile_until(
        backend, lambda: Task.objects.filter(attempt__job=job, state=TaskState.RUNNING).exists()
    )
    body = client_for(admin).get(PODS).json()
    assert body["kind"] == "PodList"
    (pod,) = body["items"]
    assert pod["status"]["phase"] == "Running"
    assert pod["metadata"]["labels"]["userName"] == "alice"
    assert pod["metadata"]["labels"]["jobName"] == "sleeper"
    assert pod["status"]["podIP"]
    lifecycle.stop(Job.objects.get(pk=job.pk), alice)
    settle(backend, job)
    assert client_for(admin).get(PODS).json()["items"] == []


@pytest.mark.django_db
def test_only_an_admin_lists_pods(alice):
    response = client_for(alice).get(PODS)
    assert (response.status_code, response.json()["code"]) == (403, "ForbiddenUserError")


@pytest.mark.django_db
def test_another_namespace_holds_no_pods(alice, admin):
    job_with_tasks(alice)
    Task.objects.update(backend_ref="k/x")
    assert client_for(admin).get(f"{PODS}?namespace=elsewhere").json()["items"] == []


@pytest.mark.django_db
def test_pods_answer_503_when_the_backend_does_not(alice, admin, monkeypatch):
    job_with_tasks(alice)
    Task.objects.update(backend_ref="k/x")

    class Down:
        name = "down"

        def observe(self, refs):
            raise BackendUnavailable("connection refused")

    monkeypatch.setattr("jobs.api.cluster_views.get_backend", lambda: Down())
    response = client_for(admin).get(PODS)
    assert (response.status_code, response.json()["code"]) == (503, "UnavailableError")


def names(body) -> list[str]:
    return [a["labels"]["alertname"] for a in body]


@pytest.mark.django_db
def test_a_job_waiting_long_is_an_alert_for_its_owner_and_admins(alice, bob, admin):
    job = lifecycle.submit(alice, one_role("stuck", ["true"]))
    assert client_for(alice).get(ALERTS).json() == []
    Job.objects.filter(pk=job.pk).update(created_at=timezone.now() - timedelta(hours=2))
    (found,) = client_for(alice).get(ALERTS).json()
    assert found["labels"]["alertname"] == "JobWaitingTooLong"
    assert (found["labels"]["job_name"], found["labels"]["username"]) == ("alice~stuck", "alice")
    assert client_for(bob).get(ALERTS).json() == []
    assert "JobWaitingTooLong" in names(client_for(admin).get(ALERTS).json())


@pytest.mark.django_db
def test_a_task_killed_for_memory_is_an_alert(alice):
    job = job_with_tasks(alice)
    spec = exitspec.explain(137, "OOMKilled")
    assert spec is not None
    Task.objects.filter(attempt__job=job).update(
        state="FAILED", exit_code=137, exit_spec=spec.as_dict(), completed_at=timezone.now()
    )
    (found,) = client_for(alice).get(ALERTS).json()
    assert found["labels"]["alertname"] == "TaskOOMKilled"
    assert found["labels"]["task_role"] == "main"


@pytest.mark.django_db
def test_a_node_not_seen_lately_is_an_alert_for_admins_only(alice, admin):
    Node.objects.create(name="gpu-7", cpu=8, memory_mb=1000)
    Node.objects.update(updated_at=timezone.now() - timedelta(hours=1))
    found = client_for(admin).get(ALERTS).json()
    assert [
        a["labels"].get("node") for a in found if a["labels"]["alertname"] == "NodeNotReporting"
    ] == ["gpu-7"]
    assert client_for(alice).get(ALERTS).json() == []


@pytest.mark.django_db
def test_an_unreachable_backend_is_an_alert(admin, monkeypatch):
    class Down:
        name = "kubernetes"

        def capacity(self):
            raise BackendUnavailable("the API server does not answer")

    monkeypatch.setattr("jobs.api.cluster_views.get_backend", lambda: Down())
    found = client_for(admin).get(ALERTS).json()
    assert names(found) == ["BackendUnreachable"]
    assert "does not answer" in found[0]["annotations"]["summary"]
