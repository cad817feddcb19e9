"""Whole jobs through the real submit function and reconcile passes, on the fake cluster."""

from __future__ import annotations

import textwrap

import kubernetes_validate
import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families
from test_kubernetes_backend import running, terminated

from backends.base import BackendUnavailable
from jobs import lifecycle
from jobs.lifecycle.passes import reconcile, run_pass
from jobs.models import Job, JobAttempt, Task
from jobs.states import JobState, TaskState
from tests.support.fake_cluster import FakeCluster, strings

pytestmark = pytest.mark.django_db
GRACE = 3600  # longer than any pod's termination grace period

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
    key = JobAttempt.objects.get(job=job).key
    assert tasks["worker-1"].ip == f"worker-1.pai-{key}"
    script = cluster.objects[("secrets", "default", pod_of(tasks["ps_server-0"]))]
    assert f"export PAI_HOST_IP_worker_1=worker-1.pai-{key}" in (strings(script)["bootstrap.sh"])
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
    pods = cluster.pods().values()
    assert len(pods) == 3 and all("deletionTimestamp" in p["metadata"] for p in pods)
    run_pass(k8s)  # the pods are Terminating: their tasks still hold the node
    job.refresh_from_db()
    assert job.state == JobState.STOPPING
    cluster.advance(GRACE)
    assert cluster.pods() == {}
    run_pass(k8s)  # observes the pods gone
    run_pass(k8s)
    job.refresh_from_db()
    assert job.state == JobState.STOPPED
    assert {t.state for t in tasks_of(job).values()} == {TaskState.STOPPED}


# -- secrets out of the script, storages, cleanup and debug through real passes ----------------

PLUGINS = """\
extras:
  jobEnvs: {isDebug: true}
  com.microsoft.pai.runtimeplugin:
    - plugin: ssh
      parameters: {jobssh: true}
    - plugin: teamwise_storage
      parameters: {storageConfigNames: [%s]}
"""


def with_plugins(name: str, storage: str) -> str:
    return JOB.replace("name: k8s_job", f"name: {name}") + PLUGINS % storage


def test_the_ssh_key_is_a_mounted_file_and_a_pvc_is_mounted(alice, k8s, cluster: FakeCluster):
    from backends.kubernetes import manifests as m
    from clusters.models import Storage

    Storage.objects.create(name="datasets", kind="pvc", claim_name="ds-claim", open_to_all=True)
    job = lifecycle.submit(alice, with_plugins("keyed", "datasets"))
    assert run_pass(k8s).launched == 3
    job.refresh_from_db()
    name = pod_of(tasks_of(job)["worker-0"])
    secret = cluster.objects[("secrets", "default", name)]
    script = strings(secret)["bootstrap.sh"]
    assert "PRIVATE KEY" not in script and "portal_file .ssh/id_job" in script
    assert strings(secret)[m.file_key(".ssh/id_job")].strip() == job.ssh_private_key.strip()
    assert "export PAI_STORAGE_datasets=/mnt/datasets" in script
    pod = cluster.objects[("pods", "default", name)]
    assert {"name": "storage-0", "persistentVolumeClaim": {"claimName": "ds-claim",
            "readOnly": False}} in pod["spec"]["volumes"]  # fmt: skip
    assert pod["metadata"]["annotations"][m.DEBUG_KEEP_HOURS] == "24"
    for manifest in cluster.created:
        kubernetes_validate.validate(manifest, desired_version="1.30", strict=True)


def test_a_local_dir_storage_fails_the_tasks_with_a_reason(alice, k8s, cluster: FakeCluster):
    from clusters.models import Storage

    Storage.objects.create(name="scratch", path="/srv/scratch", open_to_all=True)
    job = lifecycle.submit(alice, with_plugins("local_dir", "scratch"))
    run_pass(k8s)
    task = tasks_of(job)["worker-0"]
    assert task.state == TaskState.FAILED
    assert "'scratch' is a directory on the portal's machine (local-dir)" in task.diagnostics
    assert cluster.pods() == {}


def test_a_debug_jobs_failed_pod_is_kept_when_the_job_fails(alice, k8s, cluster: FakeCluster):
    from clusters.models import Storage

    Storage.objects.create(name="datasets", kind="pvc", claim_name="ds", open_to_all=True)
    job = lifecycle.submit(alice, with_plugins("debugging", "datasets"))
    run_pass(k8s)
    tasks = tasks_of(job)
    for task in tasks.values():
        cluster.set_status(pod_of(task), running("10.0.0.9", "node-a"))
    run_pass(k8s)
    failed = pod_of(tasks["worker-1"])
    cluster.set_status(failed, terminated("Failed", 1, "Error", "node-a"))
    cluster.objects[("pods", "default", failed)]["status"]["containerStatuses"][0]["state"][
        "terminated"
    ]["finishedAt"] = "2999-01-01T00:00:00Z"  # just now, as far as the keep time goes
    for _ in range(4):
        run_pass(k8s)
    job.refresh_from_db()
    assert job.state == JobState.FAILED
    cluster.advance(GRACE)  # the others were stopped and have terminated
    assert set(cluster.pods()) == {failed}  # the failed one stays


def test_cleanup_keeps_recent_attempts_and_deletes_old_and_unknown_ones(
    alice, k8s, cluster: FakeCluster, settings
):
    from datetime import timedelta

    from django.core.cache import cache
    from django.utils import timezone
    from test_kubernetes_backend import launch_all

    from jobs.lifecycle import cleanup
    from jobs.models import JobAttempt

    settings.K8S_KEEP_FINISHED_HOURS = 24
    job = lifecycle.submit(alice, JOB)
    run_pass(k8s)
    key = JobAttempt.objects.get(job=job).key
    launch_all(k8s, key="job99999-a0")  # a job the portal does not know
    cache.delete(cleanup.CLEANUP_KEY)
    run_pass(k8s)  # the pass cleans up at most every CLEANUP_EVERY_SECONDS
    assert {p["metadata"]["labels"]["gpu-portal/attempt"] for p in cluster.pods().values()} == {key}
    JobAttempt.objects.filter(key=key).update(
        state=JobState.SUCCEEDED, completed_at=timezone.now() - timedelta(hours=2)
    )
    Task.objects.filter(attempt__key=key).update(state=TaskState.SUCCEEDED)
    assert cleanup.cleanup(k8s) is None  # not yet: the last cleanup is recent
    assert cleanup.cleanup(k8s, force=True) == []  # finished 2 hours ago: logs stay readable
    JobAttempt.objects.filter(key=key).update(completed_at=timezone.now() - timedelta(hours=25))
    assert cleanup.cleanup(k8s, force=True) == [key]
    assert cluster.pods() == {}


# -- an unavailable API server during launch fails no job; a refusal fails the task ---------------


@pytest.mark.parametrize("storm", [429, 503])
def test_a_storm_of_refused_creates_leaves_the_job_to_launch_later(
    alice, k8s, cluster: FakeCluster, storm: int
):
    job = lifecycle.submit(alice, JOB)
    cluster.create_fault = storm  # every create, every retry of it
    with pytest.raises(BackendUnavailable, match=f"HTTP {storm}"):
        run_pass(k8s)
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    assert [(t.state, t.backend_ref, t.diagnostics) for t in tasks_of(job).values()] == [
        (TaskState.WAITING, "", "")
    ] * 3
    assert cluster.pods() == {}

    cluster.create_fault = None  # the API server recovers: the next pass launches them all
    assert run_pass(k8s).launched == 3
    assert len(cluster.pods()) == 3


def test_a_create_the_api_server_finds_invalid_fails_the_tasks_with_its_reason(
    alice, k8s, cluster: FakeCluster
):
    job = lifecycle.submit(alice, JOB)
    cluster.create_fault = 422
    run_pass(k8s)
    task = tasks_of(job)["worker-0"]
    assert task.state == TaskState.FAILED
    # the server's own message, not the client's dump of the response
    assert task.diagnostics == "could not start: the cluster refused the service: injected"
    job.refresh_from_db()  # settled in the pass that failed to launch it
    assert job.state == JobState.FAILED


# -- an image that never comes fails its task, with the kubelet's words ------------------------


def pull_error(reason: str, message: str, minutes_ago: int) -> dict[str, object]:
    from datetime import UTC, datetime, timedelta

    from test_kubernetes_backend import waiting

    status = waiting(reason, message)
    started = datetime.now(UTC) - timedelta(minutes=minutes_ago)
    status["startTime"] = started.strftime("%Y-%m-%dT%H:%M:%SZ")
    return status


DENIED = (
    'failed to pull and unpack image "registry.example.com/private:1": pull access denied, '
    "repository does not exist or may require authorization"
)


def test_an_image_pull_failing_past_the_timeout_fails_the_task(alice, k8s, cluster: FakeCluster):
    job = lifecycle.submit(alice, JOB)
    run_pass(k8s)
    tasks = tasks_of(job)
    worker, ps = pod_of(tasks["worker-0"]), pod_of(tasks["ps_server-0"])
    cluster.set_status(ps, pull_error("ImagePullBackOff", DENIED, minutes_ago=1))
    cluster.set_status(worker, pull_error("ErrImagePull", DENIED, minutes_ago=6))
    run_pass(k8s)
    tasks = tasks_of(job)
    waiting_one, failed = tasks["ps_server-0"], tasks["worker-0"]
    assert waiting_one.state == TaskState.WAITING  # within K8S_IMAGE_PULL_TIMEOUT_SECONDS
    assert waiting_one.diagnostics.startswith("ImagePullBackOff: failed to pull")
    assert failed.state == TaskState.FAILED
    assert failed.exit_spec["id"] == "image-pull"
    assert failed.diagnostics.startswith(f"Image pull failure: ErrImagePull: {DENIED}")
    assert "deletionTimestamp" in cluster.pods()[worker]["metadata"]  # deleted, Terminating
    cluster.advance(GRACE)
    assert worker not in cluster.pods()  # it holds no node's resources any more
    from jobs.api.openpai import task_status  # the API's view of it

    assert DENIED in task_status(failed)["containerExitDiagnostics"]


def test_an_invalid_image_name_fails_the_task_at_once(alice, k8s, cluster: FakeCluster):
    job = lifecycle.submit(alice, JOB)
    run_pass(k8s)
    worker = pod_of(tasks_of(job)["worker-1"])
    message = 'Failed to apply default image tag "Python:3.11": invalid reference format'
    cluster.set_status(worker, pull_error("InvalidImageName", message, minutes_ago=0))
    run_pass(k8s)
    task = tasks_of(job)["worker-1"]
    assert (task.state, task.exit_spec["id"]) == (TaskState.FAILED, "image-pull")
    assert message in task.diagnostics


def test_metrics_count_the_passes_and_those_the_backend_failed(alice, k8s, cluster: FakeCluster):
    def figures() -> dict[str, float]:
        body = Client().get("/metrics").content.decode()
        return {
            sample.name: sample.value
            for family in text_string_to_metric_families(body)
            for sample in family.samples
            if sample.name.startswith(("portal_reconcile_pass_seconds", "portal_backend_errors"))
        }

    before = figures()
    lifecycle.submit(alice, JOB)
    cluster.create_fault = 503
    with pytest.raises(BackendUnavailable):
        reconcile(k8s)
    cluster.create_fault = None
    reconcile(k8s)
    after = figures()
    assert after["portal_backend_errors_total"] == before["portal_backend_errors_total"] + 1
    # The failed pass ended in no figure; the next one did, and took some time.
    assert (
        after["portal_reconcile_pass_seconds_count"]
        >= before["portal_reconcile_pass_seconds_count"] + 1
    )
    assert after["portal_reconcile_pass_seconds_sum"] > before["portal_reconcile_pass_seconds_sum"]
