"""Where the portal's checks differ from OpenPAI's (issue 20), each rule tested by its name.

OpenPAI's sources: its job checker (microsoft/pai ``src/rest-server/src/config/v2/protocol.js``,
``config/job.js`` for v1) and its published schema (microsoft/openpai-protocol
``schemas/v2/schema.yaml``).
"""

# ruff: noqa: E501 - the tables of cases read best one case a line
from __future__ import annotations

import pytest
from protocol_samples import V2_JOB, changed

from protocol import ProtocolError, ProtocolIssue, load_job, normalise


def issues_of(document: dict[str, object]) -> list[ProtocolIssue]:
    with pytest.raises(ProtocolError) as caught:
        normalise(document)
    return caught.value.issues


# OpenPAI reads numbers as JavaScript does: 2.0 is 2.
@pytest.mark.parametrize(
    ("path", "value", "canonical_path", "expected"),
    [
        ("taskRoles.worker.resourcePerInstance.cpu", 1.0, ("taskRoles", "worker", "resourcePerInstance", "cpu"), 1),
        ("taskRoles.worker.instances", 2.0, ("taskRoles", "worker", "instances"), 2),
        ("protocolVersion", 2.0, ("protocolVersion",), 2),
        ("jobRetryCount", 3.0, ("jobRetryCount",), 3),
        ("taskRoles.worker.resourcePerInstance.ports.ssh", 2.0, ("taskRoles", "worker", "resourcePerInstance", "ports", "ssh"), 2),
    ],
)  # fmt: skip
def test_whole_float_is_the_integer_it_equals(
    path: str, value: float, canonical_path: tuple[str, ...], expected: int
) -> None:
    found: object = normalise(changed(V2_JOB, path, value)).job
    for key in canonical_path:
        assert isinstance(found, dict)
        found = found[key]
    assert found == expected and type(found) is int


def test_whole_float_written_in_yaml_is_accepted() -> None:
    text = (
        "protocolVersion: 2.0\nname: floats\ntype: job\n"
        "prerequisites:\n  - {name: image, type: dockerimage, uri: 'ubuntu:22.04'}\n"
        "taskRoles:\n  main:\n    instances: 2.0\n    dockerImage: image\n"
        "    resourcePerInstance: {cpu: 1.0, memoryMB: 512.0, gpu: 0.0}\n"
        "    commands: [echo hi]\n"
    )
    role = load_job(text).job["taskRoles"]["main"]
    assert role["instances"] == 2 and role["resourcePerInstance"] == {
        "cpu": 1, "memoryMB": 512, "gpu": 0, "ports": {}
    }  # fmt: skip


def test_fraction_where_an_integer_is_required_is_refused() -> None:
    assert issues_of(changed(V2_JOB, "taskRoles.worker.resourcePerInstance.cpu", 1.5)) == [
        ProtocolIssue(
            "taskRoles.worker.resourcePerInstance.cpu",
            "must be a whole number (an integer), got 1.5",
        )
    ]


# Accepted here before and refused by OpenPAI: each is refused now, naming the field.
REFUSED = [
    ("shm_more_than_memory", "taskRoles.worker.extraContainerOptions", {"shmMB": 2048}, "taskRoles.worker.extraContainerOptions.shmMB", "must not be more than memoryMB (1024), got 2048"),
    ("prerequisite_name_outside_the_pattern", "prerequisites[3].name", "out put", "prerequisites[3].name", 'must match ^[a-zA-Z0-9_-]+$, got "out put"'),
    ("prerequisite_name_longer_than_255", "prerequisites[3].name", "o" * 256, "prerequisites[3].name", "must be at most 255 characters long"),
    ("dockerimage_unknown_key", "prerequisites[0].tag", "latest", "prerequisites[0].tag", "unknown field"),
    ("unclosed_reference_tag", "taskRoles.worker.commands[0]", "echo <% $parameters.model", "taskRoles.worker.commands[0]", 'a "<%" without its closing "%>"'),
    ("unclosed_reference_tag_after_a_closed_one", "taskRoles.worker.commands[0]", "<% $parameters.model %> <%", "taskRoles.worker.commands[0]", 'a "<%" without its closing "%>"'),
]  # fmt: skip


@pytest.mark.parametrize(
    ("path", "value", "issue_path", "message"),
    [case[1:] for case in REFUSED],
    ids=[case[0] for case in REFUSED],
)
def test_refused_as_openpai_refuses(
    path: str, value: object, issue_path: str, message: str
) -> None:
    # (a renamed prerequisite leaves the role that selects it with an issue of its own)
    assert ProtocolIssue(issue_path, message) in issues_of(changed(V2_JOB, path, value))


def test_shm_more_than_memory_in_a_v1_job_is_refused() -> None:
    from protocol_samples import V1_JOB

    document = changed(V1_JOB, "taskRoles[0].shmMB", 2048)
    assert issues_of(document) == [
        ProtocolIssue("taskRoles[0].shmMB", "must not be more than memoryMB (1024), got 2048")
    ]


def test_plugin_keys_on_a_data_prerequisite_are_still_kept() -> None:
    job = normalise(changed(V2_JOB, "prerequisites[1].mountPoint", "/data")).job
    assert job["prerequisites"][1]["mountPoint"] == "/data"


# Accepted by OpenPAI and refused here before.
def test_protocol_version_inside_a_role_is_accepted() -> None:
    job = normalise(changed(V2_JOB, "taskRoles.worker.protocolVersion", "2")).job
    assert "protocolVersion" not in job["taskRoles"]["worker"]  # the job's own says it all


def test_protocol_version_inside_a_role_must_be_two() -> None:
    assert issues_of(changed(V2_JOB, "taskRoles.worker.protocolVersion", 3)) == [
        ProtocolIssue("taskRoles.worker.protocolVersion", "must be 2, got 3")
    ]


def test_unknown_key_inside_defaults_is_kept() -> None:
    job = normalise(changed(V2_JOB, "defaults.submitter", "sdk")).job
    assert job["defaults"] == {"deployment": "prod", "submitter": "sdk"}


def test_unknown_key_inside_auth_is_kept() -> None:
    document = changed(V2_JOB, "prerequisites[0].auth", {"username": "u", "email": "u@x"})
    job = normalise(document).job
    assert job["prerequisites"][0]["auth"] == {"username": "u", "email": "u@x"}


@pytest.mark.parametrize("event", ["taskStarts", "taskSucceeds"])
def test_callback_on_openpai_runtime_event_is_accepted(event: str) -> None:
    callback = [{"event": event, "commands": ["echo <% this.parameters.uri %>"]}]
    job = normalise(changed(V2_JOB, "prerequisites[2].callbacks", callback)).job
    assert job["prerequisites"][2]["callbacks"][0]["event"] == event


# v1 (OpenPAI's config/job.js): retryCount down to -2, and defaults for omitted fields.
@pytest.mark.parametrize("retry_count", [-1, -2])
def test_v1_retry_count_minus_one_and_two_mean_unlimited_retries(retry_count: int) -> None:
    from protocol_samples import V1_JOB

    loaded = normalise(changed(V1_JOB, "retryCount", retry_count))
    assert loaded.job["jobRetryCount"] == 2**31 - 1
    assert loaded.job["extras"]["v1"]["retryCount"] == retry_count
    assert any(w.startswith(f"retryCount: {retry_count} ") for w in loaded.warnings)


def test_v1_omitted_fields_take_openpai_v1_defaults() -> None:
    document = {
        "jobName": "bare",
        "image": "ubuntu:22.04",
        "taskRoles": [{"name": "main", "command": "echo hi", "portList": [{"label": "http"}]}],
    }
    role = normalise(document).job["taskRoles"]["main"]
    assert role["instances"] == 1
    assert role["resourcePerInstance"] == {
        "cpu": 1,
        "memoryMB": 100,
        "gpu": 0,
        "ports": {"http": 1},
    }
    assert normalise(document).job["extras"]["v1"]["beginAt"] == {"main": {"http": 0}}


def test_v1_null_for_a_number_is_refused_naming_it() -> None:
    from protocol_samples import V1_JOB

    assert issues_of(changed(V1_JOB, "taskRoles[0].cpuNumber", None)) == [
        ProtocolIssue("taskRoles[0].cpuNumber", "must be an integer >= 1, got null")
    ]


NULL = "must not be null (leave the field out for its default)"
NULLS = [
    ("instances", "taskRoles.worker.instances", NULL),
    ("parameters", "parameters", NULL),
    ("job_retry_count", "jobRetryCount", NULL),
    ("task_retry_count", "taskRoles.worker.taskRetryCount", NULL),
    ("extra_container_options", "taskRoles.worker.extraContainerOptions", NULL),
    ("cpu", "taskRoles.worker.resourcePerInstance.cpu", "is required"),
    ("commands", "taskRoles.worker.commands", "is required"),
    ("name", "name", "is required"),
    ("prerequisite_version", "prerequisites[2].version", NULL),
    ("data_uri", "prerequisites[1].uri", NULL),
    ("docker_uri", "prerequisites[0].uri", "is required"),
    ("deployment_post_commands", "deployments[0].taskRoles.worker.postCommands", NULL),
    ("default_deployment", "defaults.deployment", NULL),
]


@pytest.mark.parametrize(("path", "message"), [c[1:] for c in NULLS], ids=[c[0] for c in NULLS])
def test_null_for_a_field_is_refused_naming_it(path: str, message: str) -> None:
    assert ProtocolIssue(path, message) in issues_of(changed(V2_JOB, path, None))


def test_null_shm_is_refused_naming_it() -> None:
    options = {"shmMB": None, "infiniband": False}
    document = changed(V2_JOB, "taskRoles.worker.extraContainerOptions", options)
    assert issues_of(document) == [
        ProtocolIssue("taskRoles.worker.extraContainerOptions.shmMB", NULL)
    ]


def test_null_written_in_yaml_is_refused_naming_the_field() -> None:
    text = (
        "protocolVersion: 2\nname: nulls\ntype: job\nparameters:\n"
        "prerequisites:\n  - {name: image, type: dockerimage, uri: 'ubuntu:22.04'}\n"
        "taskRoles:\n  main:\n    instances:\n    dockerImage: image\n"
        "    resourcePerInstance: {cpu: 1, memoryMB: 512, gpu: 0}\n    commands: [echo hi]\n"
    )
    with pytest.raises(ProtocolError) as caught:
        load_job(text)
    assert caught.value.issues == [
        ProtocolIssue("parameters", NULL),
        ProtocolIssue("taskRoles.main.instances", NULL),
    ]


def test_shm_is_not_compared_with_a_memory_count_that_is_wrong() -> None:
    document = changed(V2_JOB, "taskRoles.worker.extraContainerOptions", {"shmMB": 64})
    assert issues_of(changed(document, "taskRoles.worker.resourcePerInstance.memoryMB", 0)) == [
        ProtocolIssue(
            "taskRoles.worker.resourcePerInstance.memoryMB", "must be an integer >= 1, got 0"
        )
    ]
