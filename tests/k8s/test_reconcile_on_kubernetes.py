"""Whole jobs through the real submit function and reconcile passes, on the fake cluster."""

from __future__ import annotations

import textwrap

import kubernetes_validate
import pytest
from fake_apiserver import FakeCluster
from test_kubernetes_backend import running, terminated

from jobs import lifecycle
from jobs.models import Job, Task
from jobs.reconcile import run_pass
from jobs.states import JobState, TaskState

pytestmark = pytest.mark.django_db

JOB = textwrap.dedent("""\
    protocolVersion: 2
    name: k8s_job
    type: job
    prerequisites:
      - {name: image, type: dockerimage, uri: "python:3.11"}
    taskRoles:
      ps_server:
        instances: 1
        dockerImage: image
        resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0, ports: {http: 1, ssh: 1}}
        commands: [env]
      worker:
        instances: 2
        dockerImage: image
        resourcePerInstance: {cpu: 2, memoryMB: 1024, gpu: 0, ports: {http: 2}}
        extraContainerOptions: {shmMB: 128}
        commands: [env]
    """)


def tasks_of(job: Job) -> dict[str, Task]:
    return {f"{t.role}-{t.index}": t for t in Task.objects.filter(attempt__job=job)}


def pod_of(task: Task) -> str:
    return task.backend_ref.rpartition("/")[2]


def test_a_job_runs_on_pods_that_name_their_peers_by_dns(alice, k8s, cluster: FakeCluster):
    job = lifecycle.submit(alice, JOB)
    report = run_pass(k8s)
    assert report.launched == 3
    tasks = tasks_of(job)
    assert tasks["worker-1"].ip == f"worker-1.pai-job{job.id}-a0"
    script = cluster.objects[("secrets", "default", pod_of(tasks["ps_server-0"]))]
    assert (
        f"export PAI_HOST_IP_worker_1=worker-1.pai-job{job.id}-a0"
        in (script["stringData"]["bootstrap.sh"])
    )
    for manifest in cluster.created:
        kubernetes_validate.validate(manifest, desired_version="1.30", strict=True)

    for i, task in enumerate(tasks.values()):
        cluster.set_status(pod_of(task), running(f"10.0.0.{i}", "node-a"))
    run_pass(k8s)
    assert {t.state for t in tasks_of(job).values()} == {TaskState.RUNNING}

    tasks = tasks_of(job)
    cluster.set_status(pod_of(tasks["worker-1"]), terminated("Failed", 137, "OOMKilled", "n"))
    run_pass(k8s)
    run_pass(k8s)
    job.refresh_from_db()
    worker = tasks_of(job)["worker-1"]
    assert (worker.state, worker.exit_code) == (TaskState.FAILED, 137)
    assert "OOMKilled: killed by signal 9" in worker.diagnostics  # and the exit spec's phrase
    assert job.state in (JobState.FAILED, JobState.STOPPING)


def test_stopping_a_job_deletes_its_pods_and_ends_it_stopped(alice, k8s, cluster: FakeCluster):
    job = lifecycle.submit(alice, JOB)
    run_pass(k8s)
    for task in tasks_of(job).values():
        cluster.set_status(pod_of(task), running("10.0.0.9", "node-a"))
    run_pass(k8s)
    assert lifecycle.stop(job, alice)
    run_pass(k8s)  # sends the stop: the attempt's objects are deleted
    assert cluster.pods() == {}
    run_pass(k8s)  # observes the pods gone
    run_pass(k8s)
    job.refresh_from_db()
    assert job.state == JobState.STOPPED
    assert {t.state for t in tasks_of(job).values()} == {TaskState.STOPPED}
