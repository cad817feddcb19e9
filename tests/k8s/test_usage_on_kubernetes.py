"""Task usage on Kubernetes: the metrics API (metrics-server, what ``kubectl top`` reads),
sampled by the same beat entry as on the local backend and served by the same API."""

from __future__ import annotations

import pytest
from test_kubernetes_backend import running
from test_reconcile_on_kubernetes import JOB, pod_of, tasks_of

from jobs import lifecycle, usage
from jobs.lifecycle.passes import run_pass
from jobs.models import TaskUsage
from tests.api.helpers import client_for
from tests.support.fake_cluster import FakeCluster

pytestmark = pytest.mark.django_db
MB = 1024 * 1024


def running_job(alice, k8s, cluster: FakeCluster):
    job = lifecycle.submit(alice, JOB)
    run_pass(k8s)
    tasks = tasks_of(job)
    for i, task in enumerate(tasks.values()):
        cluster.set_status(pod_of(task), running(f"10.0.0.{i}", "node-a"))
    run_pass(k8s)
    return job, tasks_of(job)


def test_running_pods_are_sampled_from_the_metrics_api_and_served(alice, k8s, cluster):
    job, tasks = running_job(alice, k8s, cluster)
    worker = tasks["worker-0"]
    cluster.set_usage(
        pod_of(worker),
        {"main": {"cpu": "1500m", "memory": "300Mi"}, "sidecar": {"cpu": "250000000n",
                                                               "memory": "20480Ki"}},
    )  # fmt: skip
    cluster.set_usage(pod_of(tasks["ps_server-0"]), {"main": {"cpu": "5m", "memory": "64Mi"}})

    assert usage.sample(k8s) == 2  # worker-1: not scraped yet, so not sampled
    row = TaskUsage.objects.get(task=worker)
    # The metrics API's cores (its own window), at once: no earlier sample needed.
    assert (row.cpu, row.memory_bytes) == (1.75, 320 * MB)
    assert (row.gpu_util, row.gpu_memory_bytes) == (None, None)  # the API has no GPUs

    body = client_for(alice).get(f"/api/v2/jobs/alice~{job.name}/usage").json()
    served = {(t["taskRole"], t["taskIndex"]): t["points"] for t in body["tasks"]}
    assert [p[1:] for p in served[("worker", 0)]] == [[1.75, 320.0, None, None]]
    assert [p[1:] for p in served[("ps_server", 0)]] == [[0.005, 64.0, None, None]]
    assert served[("worker", 1)] == []


def test_a_pod_that_is_not_running_has_no_usage(alice, k8s, cluster):
    job = lifecycle.submit(alice, JOB)
    run_pass(k8s)
    task = tasks_of(job)["worker-0"]
    cluster.set_usage(pod_of(task), {"main": {"cpu": "1", "memory": "1Mi"}})  # still Pending
    assert k8s.usage([task.backend_ref]) == {}


def test_a_cluster_without_the_metrics_api_samples_nothing_and_fails_nothing(
    alice, k8s, cluster, caplog
):
    _, tasks = running_job(alice, k8s, cluster)
    cluster.metrics_api = False
    cluster.set_usage(pod_of(tasks["worker-0"]), {"main": {"cpu": "1", "memory": "1Mi"}})
    assert usage.sample(k8s) == 0
    assert usage.sample(k8s) == 0
    said = [r.message for r in caplog.records if "metrics API" in r.message]
    assert said == ["no metrics API (metrics-server) in the cluster: no task usage"]  # once
    cluster.metrics_api = True  # installed later: sampled from then on, without a restart
    assert usage.sample(k8s) == 1
