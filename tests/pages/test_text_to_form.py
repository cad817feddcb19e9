"""Switching text -> form: the server loads the text through the protocol and fills the form;
what the form cannot show keeps the job in text, saying why."""

from __future__ import annotations

import json
import textwrap

import pytest
from django.test import Client

from jobs.forms.from_job import fill_form
from protocol import load_job
from tests.jobs.samples import hello_job

pytestmark = pytest.mark.django_db

FULL = textwrap.dedent("""\
    protocolVersion: 2
    name: full
    type: job
    prerequisites: [{name: img, type: dockerimage, uri: "python:3.11"}]
    parameters: {lr: 0.1, epochs: 3}
    secrets: {token: s3cr3t-value}
    jobRetryCount: 2
    taskRoles:
      trainer:
        instances: 2
        completion: {minFailedInstances: 2, minSucceededInstances: 1}
        taskRetryCount: 1
        dockerImage: img
        extraContainerOptions: {shmMB: 128}
        resourcePerInstance: {cpu: 2, memoryMB: 512, gpu: 1, ports: {http: 1, ssh: 1}}
        commands: ["echo one", "echo <% $parameters.lr %>"]
      ps:
        dockerImage: img
        resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0}
        commands: [echo ps]
    deployments:
      - name: dep
        taskRoles:
          trainer: {preCommands: [echo pre], postCommands: [echo post]}
          ps: {preCommands: [echo pre], postCommands: [echo post]}
    defaults: {virtualCluster: default, deployment: dep}
    extras:
      com.microsoft.pai.runtimeplugin: [{plugin: ssh, parameters: {jobssh: true}}]
      hivedscheduler: {taskRoles: {trainer: {gpuType: V100}}}
    """)

CALLBACKS = textwrap.dedent("""\
    protocolVersion: 2
    name: called
    type: job
    prerequisites:
      - {name: img, type: dockerimage, uri: python}
      - name: fetch
        type: script
        plugin: com.microsoft.pai.runtimeplugin.cmd
        callbacks: [{event: containerStart, commands: [echo fetched]}]
    taskRoles:
      main:
        dockerImage: img
        prerequisites: [fetch]
        resourcePerInstance: {cpu: 1, memoryMB: 128, gpu: 0}
        commands: [echo hi]
    """)


def to_form(web: Client, text: str, **extra: str):
    return web.post("/jobs/submit/text-to-form/", {"text": text, **extra})


def test_every_field_of_a_v2_job_lands_in_the_form():
    fields = fill_form(load_job(FULL).job).fields
    assert fields["name"] == "full" and fields["image"] == "python:3.11"
    assert fields["virtual_cluster"] == "default" and fields["job_retry"] == "2"
    assert fields["parameters"] == "lr: 0.1\nepochs: 3"
    assert fields["secrets"] == "token: s3cr3t-value"
    assert fields["ssh"] == "1"
    assert fields["deployment_name"] == "dep"
    assert (fields["pre_commands"], fields["post_commands"]) == ("echo pre", "echo post")
    assert {k[len("role-0-") :]: v for k, v in fields.items() if k.startswith("role-0-")} == {
        "name": "trainer", "instances": "2", "cpu": "2", "memory": "512", "gpu": "1",
        "gputype": "V100", "shm": "128", "ports": "http:1 ssh:1",
        "commands": "echo one\necho <% $parameters.lr %>", "min_failed": "2",
        "min_succeeded": "1", "task_retry": "1",
    }  # fmt: skip
    assert fields["role-1-name"] == "ps" and fields["role-1-gputype"] == ""


def test_the_page_fills_the_builder_from_pasted_text(web):
    response = to_form(web, FULL)
    assert response.status_code == 200
    body = response.content.decode()
    assert 'id="builder-form"' in body
    assert 'value="full"' in body and 'value="trainer"' in body and 'value="V100"' in body
    assert "echo &lt;% $parameters.lr %&gt;" in body
    assert json.loads(response["HX-Trigger-After-Swap"]) == {"showTab": {"tab": "form"}}


def test_a_v1_json_job_fills_the_form_with_a_note(web):
    v1 = {
        "jobName": "old_style", "image": "python:3.11", "virtualCluster": "default",
        "taskRoles": [{"name": "main", "taskNumber": 2, "cpuNumber": 1, "memoryMB": 256,
                       "gpuNumber": 0, "command": "echo v1"}],
    }  # fmt: skip
    body = to_form(web, json.dumps(v1)).content.decode()
    assert 'value="old_style"' in body and 'value="main"' in body and "echo v1" in body
    assert "QIZHI_" in body


def test_what_the_form_cannot_show_keeps_the_job_in_text(web):
    response = to_form(web, CALLBACKS)
    assert response.status_code == 400
    body = response.content.decode()
    assert "prerequisites callbacks the form cannot show: fetch (script)" in body
    assert "stay in text mode" in body
    assert 'id="builder-form"' not in body and "HX-Trigger-After-Swap" not in response


def test_a_difference_no_named_limit_covers_is_still_said():
    job = load_job(hello_job()).job
    job["parameters"] = {"note": "two\nlines"}  # a value the key: value lines cannot hold
    assert "the form cannot keep parameters.note as it is" in fill_form(job).cannot


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (hello_job().replace("cpu: 1", "cpu: lots"), "taskRoles.main.resourcePerInstance.cpu"),
        ("", "is empty"),
    ],
)
def test_errors_in_the_text_stay_in_text_with_the_errors(web, text, said):
    response = to_form(web, text)
    assert response.status_code == 400
    assert said in response.content.decode()
    if text:
        assert "line 9" in response.content.decode()


def test_the_text_panes_choice_of_virtual_cluster_wins(web):
    fields = fill_form(load_job(FULL).job, vc="research").fields
    assert fields["virtual_cluster"] == "research"
    response = to_form(web, FULL, deployment="nope")
    assert response.status_code == 400 and b"no deployment nope" in response.content


def test_the_upload_hint_says_the_real_limit(web, settings):
    settings.JOB_MAX_BYTES = 2048
    body = web.get("/jobs/submit/").content.decode()
    assert "At most 2.0\xa0KB (2048 bytes)" in body
