"""The order of work in a task: callbacks, pre/post commands, the role's commands."""

from __future__ import annotations

import textwrap

import pytest

from jobs import lifecycle
from jobs.models import Task
from jobs.states import JobState
from tests.jobs.helpers import settle

pytestmark = pytest.mark.django_db(transaction=True)


def job_with_callbacks(name: str, command: str, policy: str = "fail", fail_in: str = "") -> str:
    return textwrap.dedent(f"""\
        protocolVersion: 2
        name: {name}
        type: job
        prerequisites:
          - {{name: image, type: dockerimage, uri: "python:3.11"}}
          - name: dataset
            type: data
            callbacks:
              - {{event: containerStart, commands: ["echo start dataset", "export DATASET=ready"]}}
              - {{event: containerExit, commands: ["echo exit dataset $DATASET"]}}
          - name: tools
            type: script
            require: [dataset]
            failurePolicy: {policy}
            callbacks:
              - {{event: containerStart, commands: ["echo start tools {fail_in}"]}}
              - {{event: containerExit, commands: ["echo exit tools"]}}
        deployments:
          - name: dep
            taskRoles:
              taskrole_1:
                preCommands: ["echo deployment pre"]
                postCommands: ["echo deployment post"]
        defaults: {{deployment: dep}}
        extras:
          com.microsoft.pai.runtimeplugin:
            - plugin: cmd
              parameters:
                callbacks:
                  - {{event: taskStarts, commands: ["echo cmd plugin pre"]}}
                  - {{event: taskSucceeds, commands: ["echo cmd plugin post"]}}
        taskRoles:
          taskrole_1:
            instances: 1
            dockerImage: image
            prerequisites: [tools]
            resourcePerInstance: {{cpu: 1, memoryMB: 128, gpu: 0}}
            commands: ["echo commands $DATASET", "{command}"]
        """)


def run(alice, backend, text: str) -> tuple[object, Task, list[str], str]:
    job = settle(backend, lifecycle.submit(alice, text))
    task = Task.objects.get(attempt__job=job)
    out = backend.read_log(task.backend_ref, "stdout").decode().splitlines()
    err = backend.read_log(task.backend_ref, "stderr").decode()
    return job, task, out, err


def test_each_step_runs_in_its_order(alice, backend):
    job, _, out, _ = run(alice, backend, job_with_callbacks("order", "true"))
    assert job.state == JobState.SUCCEEDED
    assert out == [
        "start dataset",
        "start tools",
        "deployment pre",
        "cmd plugin pre",
        "commands ready",
        "deployment post",
        "cmd plugin post",
        "exit tools",
        "exit dataset ready",
    ]


def test_a_failing_fail_callback_fails_the_task_naming_it(alice, backend):
    job, task, out, err = run(
        alice, backend, job_with_callbacks("cb_fail", "true", fail_in="; exit 5")
    )
    assert job.state == JobState.FAILED
    assert "[portal] callback tools failed with exit code 5" in err
    assert task.exit_code == 202
    assert "Prerequisite callback 'tools' failed" in task.diagnostics
    assert "Prerequisite callback 'tools' failed" in job.reason
    assert "commands ready" not in out
    assert out[-2:] == ["exit tools", "exit dataset ready"]


def test_a_failing_ignore_callback_lets_the_task_go_on(alice, backend):
    text = job_with_callbacks("cb_ignore", "true", policy="ignore", fail_in="; exit 5")
    job, _, out, err = run(alice, backend, text)
    assert job.state == JobState.SUCCEEDED
    assert "callback tools failed with exit code 5; ignored" in err
    assert "commands ready" in out


def test_container_exit_callbacks_run_after_a_failed_command(alice, backend):
    job, task, out, _ = run(alice, backend, job_with_callbacks("cmd_fails", "exit 3"))
    assert job.state == JobState.FAILED
    assert task.exit_code == 3
    assert "cmd plugin post" not in out  # taskSucceeds only
    assert out[-3:] == ["deployment post", "exit tools", "exit dataset ready"]


def job_with_task_events(name: str, command: str) -> str:
    return textwrap.dedent(f"""\
        protocolVersion: 2
        name: {name}
        type: job
        prerequisites:
          - {{name: image, type: dockerimage, uri: "python:3.11"}}
          - name: tools
            type: script
            callbacks:
              - {{event: taskStarts, commands: ["echo task starts", "export TOOLS=ready"]}}
              - {{event: taskSucceeds, commands: ["echo task succeeds $TOOLS"]}}
              - {{event: containerExit, commands: ["echo container exit"]}}
        taskRoles:
          taskrole_1:
            dockerImage: image
            prerequisites: [tools]
            resourcePerInstance: {{cpu: 1, memoryMB: 128, gpu: 0}}
            commands: ["echo commands $TOOLS", "{command}"]
        """)


def test_task_starts_and_task_succeeds_callbacks_run_as_openpai_runs_them(alice, backend):
    job, _, out, _ = run(alice, backend, job_with_task_events("task_events", "true"))
    assert job.state == JobState.SUCCEEDED
    assert out == ["task starts", "commands ready", "container exit", "task succeeds ready"]


def test_task_succeeds_callback_does_not_run_after_a_failure(alice, backend):
    job, task, out, _ = run(alice, backend, job_with_task_events("task_fails", "exit 4"))
    assert job.state == JobState.FAILED and task.exit_code == 4
    assert out == ["task starts", "commands ready", "container exit"]
