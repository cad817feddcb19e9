"""Whole jobs on the local backend, through the real submit function and reconcile passes."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from django.db import transaction

from jobs import lifecycle
from jobs.lifecycle import passes
from jobs.lifecycle.passes import run_pass
from jobs.models import Job, JobAttempt, JobEvent, Task
from jobs.states import JobState, TaskState
from tests.clusters.helpers import job_text
from tests.jobs.helpers import env_of, reconcile_until, settle
from tests.support.processes import processes_running
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def two_role_job(name: str = "tf_env", worker_command: str = "env") -> str:
    return textwrap.dedent(f"""\
        protocolVersion: 2
        name: {name}
        type: job
        prerequisites:
          - {{name: image, type: dockerimage, uri: "python:3.11"}}
        parameters:
          greeting: hello
        taskRoles:
          ps_server:
            instances: 1
            completion: {{minSucceededInstances: -1}}
            dockerImage: image
            resourcePerInstance: {{cpu: 1, memoryMB: 256, gpu: 0, ports: {{http: 1, ssh: 1}}}}
            commands:
              - env
              - echo "<% $parameters.greeting %> from ps"
          worker:
            instances: 2
            dockerImage: image
            resourcePerInstance: {{cpu: 1, memoryMB: 256, gpu: 0, ports: {{http: 2}}}}
            commands:
              - {worker_command}
        """)


def test_a_two_role_job_runs_to_success_and_every_task_sees_its_peers(alice, backend):
    job = lifecycle.submit(alice, two_role_job())
    assert job.state == JobState.WAITING

    job = settle(backend, job)

    assert job.state == JobState.SUCCEEDED
    tasks = {f"{t.role}-{t.index}": t for t in Task.objects.filter(attempt__job=job)}
    assert set(tasks) == {"ps_server-0", "worker-0", "worker-1"}
    assert tasks["worker-0"].state == TaskState.SUCCEEDED
    assert tasks["worker-0"].exit_code == 0
    worker_env = env_of(backend.read_log(tasks["worker-1"].backend_ref, "stdout").decode())
    worker_hosts = [f"{t.ip}:{t.ports['http'][0]}" for t in (tasks["worker-0"], tasks["worker-1"])]
    ps = tasks["ps_server-0"]
    assert worker_env["PAI_TASK_ROLE_worker_HOST_LIST"] == ",".join(worker_hosts)
    assert worker_env["PAI_TASK_ROLE_ps_server_HOST_LIST"] == f"{ps.ip}:{ps.ports['http'][0]}"
    assert worker_env["PAI_CURRENT_TASK_ROLE_NAME"] == "worker"
    assert worker_env["PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX"] == "1"
    assert worker_env["PAI_HOST_IP_ps_server_0"] == ps.ip
    assert worker_env["PAI_PORT_LIST_ps_server_0_ssh"] == str(ps.ports["ssh"][0])
    assert worker_env["PAI_CONTAINER_HOST_http_PORT_LIST"] == ",".join(
        map(str, tasks["worker-1"].ports["http"])
    )
    assert len(tasks["worker-1"].ports["http"]) == 2
    ps_out = backend.read_log(ps.backend_ref, "stdout").decode()
    assert "hello from ps" in ps_out


def test_every_task_gets_ports_of_its_own(alice, backend):
    job = settle(backend, lifecycle.submit(alice, two_role_job()))
    ports = [
        p for t in Task.objects.filter(attempt__job=job) for ps in t.ports.values() for p in ps
    ]
    assert len(ports) == len(set(ports)) == 4 + 2


def test_a_failing_task_fails_the_job_under_min_failed_instances_one(alice, backend):
    job = lifecycle.submit(alice, two_role_job("fails", worker_command="exit 3"))

    job = settle(backend, job)

    assert job.state == JobState.FAILED
    assert job.exit_code == 3
    assert "task role 'worker'" in job.reason
    assert "exited with code 3" in job.reason
    ps = Task.objects.get(attempt__job=job, role="ps_server")
    assert ps.state in (TaskState.SUCCEEDED, TaskState.STOPPED)


def test_an_attempt_that_succeeds_early_stops_the_tasks_still_running(alice, backend):
    protocol = json.loads(job_text("early", command='[ "$PAI_TASK_INDEX" = 0 ] || sleep 600'))
    protocol["taskRoles"]["main"].update(instances=2, completion={"minSucceededInstances": 1})
    job = settle(backend, lifecycle.submit(alice, json.dumps(protocol)))  # none of it live

    assert job.state == JobState.SUCCEEDED
    states = dict(Task.objects.filter(attempt__job=job).values_list("index", "state"))
    assert states == {0: TaskState.SUCCEEDED, 1: TaskState.STOPPED}


def retrying_job(name: str, marker: Path, task_retries: int, job_retries: int) -> str:
    return textwrap.dedent(f"""\
        protocolVersion: 2
        name: {name}
        type: job
        jobRetryCount: {job_retries}
        prerequisites: [{{name: img, type: dockerimage, uri: python}}]
        parameters:
          marker: "{marker}"
        taskRoles:
          main:
            taskRetryCount: {task_retries}
            dockerImage: img
            resourcePerInstance: {{cpu: 1, memoryMB: 128, gpu: 0}}
            commands:
              - if [ -f "<% $parameters.marker %>" ]; then echo second run; exit 0; fi
              - touch "<% $parameters.marker %>"
              - exit 7
        """)


def test_a_failed_task_is_retried_within_its_attempt(alice, backend, shared):
    job = lifecycle.submit(alice, retrying_job("task_retry", shared / "m1", 1, 0))

    job = settle(backend, job)

    assert job.state == JobState.SUCCEEDED
    task = Task.objects.get(attempt__job=job)
    assert task.retries == 1
    assert job.attempts.count() == 1
    assert b"second run" in backend.read_log(task.backend_ref, "stdout")


def test_a_failed_attempt_is_retried_as_a_new_attempt(alice, backend, shared):
    job = lifecycle.submit(alice, retrying_job("job_retry", shared / "m2", 0, 1))

    job = settle(backend, job)

    assert job.state == JobState.SUCCEEDED
    assert job.retries == 1
    attempts = list(job.attempts.order_by("number"))
    assert [(a.number, a.state) for a in attempts] == [(0, "FAILED"), (1, "SUCCEEDED")]
    assert "exited with code 7" in attempts[0].reason


def test_a_job_without_retries_left_fails_with_the_reason(alice, backend, tmp_path):
    marker = tmp_path / "never"
    text = retrying_job("no_retry", marker, 0, 0).replace('[ -f "', '[ -f "/nonexistent')
    job = settle(backend, lifecycle.submit(alice, text))
    assert job.state == JobState.FAILED
    assert job.exit_code == 7


def test_stop_ends_every_process_of_a_running_job(alice, backend, shared):
    pidfile = shared / "pid"
    text = two_role_job("sleepy", worker_command=f"sleep 317 & echo $! >> {pidfile}; wait")
    job = lifecycle.submit(alice, text)
    reconcile_until(
        backend,
        lambda: (
            Task.objects.filter(attempt__job=job, state=TaskState.RUNNING, role="worker").count()
            == 2
        ),
    )
    wait_for(lambda: pidfile.exists() and len(pidfile.read_text().split()) == 2)

    assert lifecycle.stop(Job.objects.get(id=job.id), alice)
    job.refresh_from_db()
    assert job.state == JobState.STOPPING
    job = settle(backend, job)

    assert job.state == JobState.STOPPED
    assert "alice" in job.reason
    assert not processes_running(["sleep", "317"])
    states = set(Task.objects.filter(attempt__job=job).values_list("state", flat=True))
    assert states <= {TaskState.STOPPED, TaskState.SUCCEEDED}


def test_stopping_a_job_whose_task_the_backend_has_not_taken_yet_stops_it(
    alice, backend, monkeypatch
):
    monkeypatch.setattr(passes, "launch", lambda backend, report: [])  # e.g. it was unavailable
    job = lifecycle.submit(alice, two_role_job("unlaunched"))
    run_pass(backend)
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    assert set(Task.objects.filter(attempt__job=job).values_list("backend_ref", flat=True)) == {""}

    assert lifecycle.stop(job, alice)
    job = settle(backend, job)  # its tasks were never launched: there is nothing to signal

    assert job.state == JobState.STOPPED
    states = set(Task.objects.filter(attempt__job=job).values_list("state", flat=True))
    assert states == {TaskState.STOPPED}


def _is_zombie(pid: str) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_stopping_a_waiting_job_stops_it_at_once(alice, backend):
    job = lifecycle.submit(alice, two_role_job("waits"))
    assert lifecycle.stop(job, alice)
    job.refresh_from_db()
    assert job.state == JobState.STOPPED
    run_pass(backend)
    assert not Task.objects.filter(attempt__job=job).exists()


def test_a_second_pass_changes_nothing(alice, backend):
    job = settle(backend, lifecycle.submit(alice, two_role_job("idem")))
    before = list(Task.objects.filter(attempt__job=job).values())
    report = run_pass(backend)
    assert (report.admitted, report.launched, report.changed_tasks) == (0, 0, 0)
    assert list(Task.objects.filter(attempt__job=job).values()) == before


def test_two_passes_at_once_launch_each_task_once(alice, backend):
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    from jobs.lifecycle.passes import reconcile

    job = lifecycle.submit(alice, two_role_job("racy", worker_command="sleep 2"))

    def one_pass() -> int:
        try:
            return reconcile(backend).launched
        finally:
            connection.close()

    with ThreadPoolExecutor(4) as pool:
        launched = sum(pool.map(lambda _: one_pass(), range(4)))
    assert launched <= 3
    dirs = [p for p in (Path(backend.root) / JobAttempt.objects.get(job=job).key).iterdir()]
    assert len(dirs) == 3
    settle(backend, job)


def test_tasks_are_found_again_by_a_new_backend_after_a_restart(alice, backend, settings):
    from backends.local import LocalBackend

    job = lifecycle.submit(alice, two_role_job("restart", worker_command="sleep 1"))
    reconcile_until(
        backend, lambda: Task.objects.filter(attempt__job=job).exclude(backend_ref="").count() == 3
    )
    restarted = LocalBackend(settings.LOCAL_TASK_ROOT, stop_grace_seconds=2.0)
    job = settle(restarted, job)
    assert job.state == JobState.SUCCEEDED
    assert os.path.isdir(settings.LOCAL_TASK_ROOT)


def test_a_database_started_afresh_does_not_take_an_old_jobs_task_for_its_own(alice, backend):
    # Ids start again at 1 in a new database, while the task root (or the cluster) may still
    # hold the old jobs' tasks until a cleanup finds them unknown: a job given an old job's id
    # and the same script must run, not be reported with the old task's end and log.
    text = job_text("again", command="date +%s%N")
    old = settle(backend, lifecycle.submit(alice, text))
    old_task = Task.objects.get(attempt__job=old)
    old_log = backend.read_log(old_task.backend_ref, "stdout")
    Job.objects.filter(id=old.id).delete()
    new = lifecycle.submit(alice, text)
    with transaction.atomic():  # the new job takes the old one's id, as in a new database
        JobEvent.objects.filter(job_id=new.id).update(job_id=old.id)
        Job.objects.filter(id=new.id).update(id=old.id)

    new = settle(backend, Job.objects.get(id=old.id))

    assert new.state == JobState.SUCCEEDED
    new_task = Task.objects.get(attempt__job=new)
    assert new_task.backend_ref != old_task.backend_ref
    assert backend.read_log(new_task.backend_ref, "stdout") not in (b"", old_log)
