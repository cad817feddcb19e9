"""A reason for every exit: each exit-spec case, from a real task to the job page and the API."""

from __future__ import annotations

import pytest
from django.utils.html import escape

from clusters.backends.base import Placement
from jobs import exitspec, lifecycle
from jobs.models import Job, Task
from jobs.states import JobState, TaskState
from tests.jobs.helpers import reconcile_until, settle
from tests.runtime.jobs import api_of, one_role, page_of

pytestmark = pytest.mark.django_db(transaction=True)

CALLBACK = """\
prerequisites:
  - {name: image, type: dockerimage, uri: "python:3.11"}
  - name: fetch
    type: data
    callbacks: [{event: containerStart, commands: ["exit 9"]}]
"""

CASES = {
    "oom": (["sh -c 'kill -KILL $$'"], 137, "Out of memory (killed by SIGKILL)"),
    "cuda": (
        ["echo 'RuntimeError: CUDA out of memory. Tried 2 GiB' >&2", "exit 1"],
        1,
        "CUDA out of memory",
    ),
    "not_found": (["no_such_command_here"], 127, "Command not found"),
    "denied": (["touch ./tool", "./tool"], 126, "Permission denied"),
    "no_space": (
        ["echo 'write: No space left on device' >&2", "exit 1"],
        1,
        "No space left on device",
    ),
    "segfault": (["sh -c 'kill -SEGV $$'"], 139, "Segmentation fault"),
    "image": (
        ["echo 'Error response from daemon: pull access denied for nope' >&2", "exit 1"],
        1,
        "Image pull failure",
    ),
}


def check_everywhere(alice, job: Job, code: int | None, phrase: str) -> None:
    task = Task.objects.get(attempt__job=job)
    assert task.exit_code == code
    assert task.exit_spec["phrase"] == phrase
    assert phrase in job.reason
    page = page_of(alice, job)
    assert escape(phrase) in page
    assert escape(task.exit_spec["reason"]) in page
    for line in task.exit_spec["lines"]:
        assert escape(line) in page
    body = api_of(alice, job)
    status = body["taskRoles"][task.role]["taskStatuses"][0]
    assert status["containerExitCode"] == code
    assert status["containerExitSpec"]["phrase"] == phrase
    assert phrase in status["containerExitDiagnostics"]
    assert body["jobStatus"]["appExitSpec"]["phrase"] == phrase
    assert body["jobStatus"]["appExitSpec"]["taskRole"] == task.role


@pytest.mark.parametrize("case", CASES)
def test_each_exit_gets_its_phrase_on_the_page_and_in_the_api(alice, backend, case):
    commands, code, phrase = CASES[case]
    job = settle(backend, lifecycle.submit(alice, one_role(f"exit_{case}", commands)))
    assert job.state == JobState.FAILED
    check_everywhere(alice, job, code, phrase)


def test_matched_log_lines_are_kept(alice, backend):
    commands, _, _ = CASES["cuda"]
    job = settle(backend, lifecycle.submit(alice, one_role("lines", commands)))
    spec = Task.objects.get(attempt__job=job).exit_spec
    assert spec["lines"] == ["RuntimeError: CUDA out of memory. Tried 2 GiB"]
    assert spec["type"] == "resource"


def test_a_failed_prerequisite_callback_is_named(alice, backend):
    text = one_role("cb", ["true"]).replace(
        '  - {name: image, type: dockerimage, uri: "python:3.11"}\n', CALLBACK.split("\n", 1)[1]
    )
    text = text.replace(
        "    dockerImage: image\n", "    dockerImage: image\n    prerequisites: [fetch]\n"
    )
    job = settle(backend, lifecycle.submit(alice, text))
    check_everywhere(alice, job, 202, "Prerequisite callback 'fetch' failed")


def test_a_barrier_that_never_passes_says_so(alice, backend, settings, monkeypatch):
    settings.TASK_BARRIER_TIMEOUT_SECONDS = 1
    real_place = backend.place

    def place_without_an_address(key, shapes):
        return [Placement("", p.ports) for p in real_place(key, shapes)]

    monkeypatch.setattr(backend, "place", place_without_an_address)
    job = settle(backend, lifecycle.submit(alice, one_role("barrier", ["true"])))
    check_everywhere(alice, job, 201, "Barrier timeout")
    assert "PAI_HOST_IP_taskrole_1_0" in Task.objects.get(attempt__job=job).exit_spec["lines"][0]


def test_a_stopped_task_is_explained_as_stopped(alice, backend):
    job = lifecycle.submit(alice, one_role("stopped", ["sleep 60"]))
    reconcile_until(
        backend, lambda: Task.objects.filter(attempt__job=job, state=TaskState.RUNNING).exists()
    )
    assert lifecycle.stop(Job.objects.get(id=job.id), alice)
    job = settle(backend, job)
    assert job.state == JobState.STOPPED
    task = Task.objects.get(attempt__job=job)
    assert task.exit_spec["phrase"] == "Stopped"
    assert "Stopped" in page_of(alice, job)
    assert api_of(alice, job)["jobStatus"]["appExitSpec"]["phrase"] == "Stopped"


def test_the_backend_saying_oomkilled_or_image_pull_is_explained():
    assert exitspec.explain(137, "OOMKilled").phrase == "Out of memory"
    pull = exitspec.explain(None, "ErrImagePull: 429 Too Many Requests")
    assert pull is not None and pull.phrase == "Image pull failure"
    assert exitspec.explain(0) is None
    assert exitspec.explain(42).phrase == "Failed with exit code 42"


def test_a_429_in_the_tasks_own_log_is_a_remote_rate_limit_not_an_image_pull():
    log = "Cloning into 'repo'...\nfatal: unable to access: The requested URL returned error: 429\n"
    explained = exitspec.explain(128, "", log)
    assert explained.phrase == "Rate limited by a remote server (HTTP 429)"
    assert explained.lines == ["fatal: unable to access: The requested URL returned error: 429"]
    docker = "toomanyrequests: You have reached your pull rate limit."
    assert exitspec.explain(1, "", docker).phrase == "Image pull failure"
