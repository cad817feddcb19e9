"""OpenPAI's task attempts and their log lists (routes/v2/job.js, controllers/v2/task.js,
models/v2/job/log.js), the job fields its k8s.js gives that the web portal and openpaisdk read,
and the v1 ``containerLog`` openpaisdk appends its log names to."""

from __future__ import annotations

import pytest

from jobs.api import task_views
from jobs.models import Job, Task
from tests.api.helpers import client_for, job_with_tasks

pytestmark = pytest.mark.django_db

JOB = "/api/v2/jobs/alice~hello"
TASK = f"{JOB}/attempts/0/taskRoles/main/taskIndex/0/attempts"


@pytest.fixture
def logs(monkeypatch) -> dict[str, object]:
    """The task logs the views read, as (ref, stream, tail) -> text, without a backend."""
    read: dict[str, object] = {}

    def tail(job, ref, stream, count):
        read["tail"] = (ref, stream, count)
        return b"the end\n"

    def whole(job, ref, stream):
        read["whole"] = (ref, stream)
        return iter([b"all of it\n"])

    monkeypatch.setattr(task_views, "read_task_log", tail)
    monkeypatch.setattr(task_views, "task_log_chunks", whole)
    return read


def started(owner) -> Job:
    job = job_with_tasks(owner)
    Task.objects.filter(attempt__job=job).update(backend_ref="ref-main-0", retries=2)
    return job


def test_task_attempts_answer_openpais_task_detail_with_its_attempts(alice):
    started(alice)
    body = client_for(alice).get(TASK).json()
    assert (body["username"], body["jobName"], body["jobAttemptId"]) == ("alice", "hello", 0)
    assert (body["taskRoleName"], body["taskIndex"], body["retries"]) == ("main", 0, 2)
    [run] = body["attempts"]
    assert (run["attemptId"], run["attemptState"], run["containerIp"]) == (2, "RUNNING", "10.0.0.5")
    assert run["containerLog"] == f"http://testserver{TASK}/2/logs"


def test_task_attempts_of_an_unknown_task_answer_openpais_404(alice):
    started(alice)
    response = client_for(alice).get(f"{JOB}/attempts/0/taskRoles/main/taskIndex/5/attempts")
    assert response.status_code == 404
    assert response.json()["code"] == "NoJobError"


def test_task_attempt_logs_answer_openpais_locations_of_our_task_logs(alice):
    started(alice)
    body = client_for(alice).get(f"{TASK}/2/logs").json()
    base = "http://testserver/api/v2/jobs/alice~hello/attempts/0/tasks/main-0/logs"
    assert body == {
        "locations": [
            {"name": "stdout", "uri": f"{base}/stdout"},
            {"name": "stderr", "uri": f"{base}/stderr"},
        ]
    }
    tail = client_for(alice).get(f"{TASK}/2/logs?tail-mode=true").json()
    assert tail["locations"][0]["uri"] == f"{base}/stdout?tail=16384"


def test_task_attempt_logs_of_another_attempt_answer_openpais_NoTaskLogError(alice):
    started(alice)
    response = client_for(alice).get(f"{TASK}/0/logs")
    assert response.status_code == 404
    assert response.json()["code"] == "NoTaskLogError"


def test_task_attempt_logs_refuse_a_bad_tail_mode_naming_it(alice):
    started(alice)
    response = client_for(alice).get(f"{TASK}/2/logs?tail-mode=yes")
    assert response.status_code == 400
    assert "tail-mode" in response.json()["message"]


def test_task_attempt_logs_are_not_another_users(alice, bob):
    started(alice)
    assert client_for(bob).get(f"{TASK}/2/logs").status_code in (403, 404)


def test_getJob_has_openpais_tags_attemptId_and_task_attempt_fields(alice):
    job = started(alice)
    Job.objects.filter(pk=job.pk).update(tags=["x"])
    body = client_for(alice).get(JOB).json()
    assert body["tags"] == ["x"]
    assert body["jobStatus"]["attemptId"] == 0
    task = body["taskRoles"]["main"]["taskStatuses"][0]
    assert (task["attemptId"], task["attemptState"]) == (2, "RUNNING")
    assert task["currentAttemptCreatedTime"] == task["createdTime"]


def test_job_list_has_openpais_debugId_retryDelayTime_and_totalTaskRoleNumber(alice):
    job = started(alice)
    [row] = client_for(alice).get("/api/v2/jobs").json()
    assert row["debugId"] == f"k-{job.id}"
    assert row["retryDelayTime"] is None
    assert row["totalTaskRoleNumber"] == 1


def test_job_list_counts_the_task_roles_of_each_job(alice):
    from jobs import lifecycle
    from tests.jobs.samples import hello_job

    second = (
        "taskRoles:\n  second:\n    dockerImage: img\n"
        "    resourcePerInstance: {cpu: 1, memoryMB: 128, gpu: 0}\n    commands: [echo two]\n"
    )
    two = hello_job("two_roles").replace("taskRoles:\n", second, 1)
    assert len(lifecycle.submit(alice, two).protocol["taskRoles"]) == 2
    [row] = client_for(alice).get("/api/v2/jobs").json()
    assert row["totalTaskRoleNumber"] == 2


def test_v1_containerLog_is_the_log_folder_openpaisdk_appends_user_pai_stdout_to(alice, logs):
    started(alice)
    client = client_for(alice)
    body = client.get("/api/v1/user/alice/jobs/hello").json()
    folder = body["taskRoles"]["main"]["taskStatuses"][0]["containerLog"]
    assert folder == "http://testserver/api/v2/jobs/alice~hello/attempts/0/tasks/main-0/logs/"
    # openpaisdk's JobStatusParser.single_task_logs: "{containerLog}user.pai.stdout/?start=0"
    response = client.get(f"{folder}user.pai.stdout/?start=0")
    assert b"".join(response.streaming_content) == b"all of it\n"
    assert logs["whole"] == ("ref-main-0", "stdout")


def test_log_managers_negative_start_reads_the_end_and_a_bad_one_is_named(alice, logs):
    started(alice)
    client = client_for(alice)
    path = "/api/v2/jobs/alice~hello/attempts/0/tasks/main-0/logs"
    assert client.get(f"{path}/user.pai.stderr?start=-8192").content == b"the end\n"
    assert logs["tail"] == ("ref-main-0", "stderr", 8192)
    response = client.get(f"{path}/stdout?start=12")
    assert response.status_code == 400
    assert "start" in response.json()["message"]
