"""Each v2 rule of the seeds, broken once: the issue names the exact path and says why."""

# ruff: noqa: E501 - the tables of cases read best one case a line
from __future__ import annotations

import pytest
from protocol_samples import DELETE, V2_JOB, changed

from protocol import ProtocolError, ProtocolIssue, normalise

CYCLE = changed(
    changed(V2_JOB, "prerequisites[1].require", ["code"]), "prerequisites[2].require", ["mnist"]
)
CALLBACK = changed(
    V2_JOB, "prerequisites[1].callbacks", [{"event": "containerStart", "commands": ["ls"]}]
)

CASES = [
    ("name_with_a_space", "name", "my job", "name", 'must match ^[a-zA-Z0-9_-]+$, got "my job"'),
    ("name_missing", "name", DELETE, "name", "is required"),
    ("protocol_version_1", "protocolVersion", 1, "protocolVersion", "must be 2, got 1"),
    ("type_not_job", "type", "component", "type", 'must be "job", got "component"'),
    ("unknown_top_level_key", "taskRole", {}, "taskRole", 'unknown field (did you mean "taskRoles"?)'),
    ("job_retry_count_as_text", "jobRetryCount", "1", "jobRetryCount", 'must be an integer >= 0, got "1"'),
    ("job_retry_count_negative", "jobRetryCount", -1, "jobRetryCount", "must be an integer >= 0, got -1"),
    ("parameters_a_list", "parameters", [], "parameters", "must be an object, got a list"),
    ("task_roles_missing", "taskRoles", DELETE, "taskRoles", "is required"),
    ("task_roles_empty", "taskRoles", {}, "taskRoles", "must have at least one task role"),
    ("instances_zero", "taskRoles.worker.instances", 0, "taskRoles.worker.instances", "must be an integer >= 1, got 0"),
    ("instances_true", "taskRoles.worker.instances", True, "taskRoles.worker.instances", "must be an integer >= 1, got true"),
    ("instances_fraction", "taskRoles.worker.instances", 1.5, "taskRoles.worker.instances", "must be a whole number (an integer), got 1.5"),
    ("instances_huge", "taskRoles.worker.instances", 10**12, "taskRoles.worker.instances", "must be an integer <= 2147483647, got 1000000000000"),
    ("min_failed_zero", "taskRoles.worker.completion", {"minFailedInstances": 0}, "taskRoles.worker.completion.minFailedInstances", "must be -1 or an integer >= 1, got 0"),
    ("min_succeeded_above_instances", "taskRoles.worker.completion", {"minSucceededInstances": 3}, "taskRoles.worker.completion.minSucceededInstances", "must not be more than instances (2), got 3"),
    ("completion_unknown_key", "taskRoles.worker.completion", {"minFailed": 1}, "taskRoles.worker.completion.minFailed", 'unknown field (did you mean "minFailedInstances"?)'),
    ("task_retry_count_negative", "taskRoles.worker.taskRetryCount", -1, "taskRoles.worker.taskRetryCount", "must be an integer >= 0, got -1"),
    ("cpu_zero", "taskRoles.worker.resourcePerInstance.cpu", 0, "taskRoles.worker.resourcePerInstance.cpu", "must be an integer >= 1, got 0"),
    ("memory_zero", "taskRoles.worker.resourcePerInstance.memoryMB", 0, "taskRoles.worker.resourcePerInstance.memoryMB", "must be an integer >= 1, got 0"),
    ("gpu_as_text", "taskRoles.worker.resourcePerInstance.gpu", "four", "taskRoles.worker.resourcePerInstance.gpu", 'must be an integer >= 0, got "four"'),
    ("gpu_missing", "taskRoles.worker.resourcePerInstance.gpu", DELETE, "taskRoles.worker.resourcePerInstance.gpu", "is required"),
    ("resources_missing", "taskRoles.worker.resourcePerInstance", DELETE, "taskRoles.worker.resourcePerInstance", "is required"),
    ("port_label_not_c_identifier", "taskRoles.worker.resourcePerInstance.ports", {"ssh-port": 1}, "taskRoles.worker.resourcePerInstance.ports.ssh-port", "a port label must match ^[a-zA-Z_][a-zA-Z0-9_]*$"),
    ("port_count_zero", "taskRoles.worker.resourcePerInstance.ports.ssh", 0, "taskRoles.worker.resourcePerInstance.ports.ssh", "must be an integer >= 1, got 0"),
    ("shm_zero", "taskRoles.worker.extraContainerOptions", {"shmMB": 0}, "taskRoles.worker.extraContainerOptions.shmMB", "must be an integer >= 1, got 0"),
    ("infiniband_as_text", "taskRoles.worker.extraContainerOptions", {"infiniband": "yes"}, "taskRoles.worker.extraContainerOptions.infiniband", 'must be true or false, got "yes"'),
    ("commands_empty", "taskRoles.worker.commands", [], "taskRoles.worker.commands", "must be a non-empty list of strings"),
    ("commands_a_string", "taskRoles.worker.commands", "echo", "taskRoles.worker.commands", 'must be a list of strings, got "echo"'),
    ("command_not_a_string", "taskRoles.worker.commands", ["echo", 3], "taskRoles.worker.commands[1]", "must be a string, got 3"),
    ("commands_missing", "taskRoles.worker.commands", DELETE, "taskRoles.worker.commands", "is required"),
    ("role_unknown_key", "taskRoles.worker.gpus", 1, "taskRoles.worker.gpus", "unknown field"),
    ("docker_image_missing", "taskRoles.worker.dockerImage", DELETE, "taskRoles.worker.dockerImage", "is required"),
    ("docker_image_names_data", "taskRoles.worker.dockerImage", "mnist", "taskRoles.worker.dockerImage", '"mnist" is a data prerequisite, not a dockerimage one'),
    ("data_names_nothing", "taskRoles.worker.data", "cifar", "taskRoles.worker.data", 'no prerequisite named "cifar"'),
    ("role_prerequisite_unknown", "taskRoles.worker.prerequisites", ["nope"], "taskRoles.worker.prerequisites[0]", 'no prerequisite named "nope"'),
    ("prerequisite_type_unknown", "prerequisites[3].type", "model", "prerequisites[3].type", 'must be one of data, script, dockerimage, output; got "model"'),
    ("prerequisite_name_missing", "prerequisites[3].name", DELETE, "prerequisites[3].name", "is required"),
    ("uri_list_on_a_script", "prerequisites[2].uri", ["a", "b"], "prerequisites[2].uri", "must be a string (only a data prerequisite may list several)"),
    ("docker_uri_missing", "prerequisites[0].uri", DELETE, "prerequisites[0].uri", "is required"),
    ("auth_on_data", "prerequisites[1].auth", {"username": "u"}, "prerequisites[1].auth", "only a dockerimage prerequisite may have auth"),
    ("prerequisite_protocol_version_3", "prerequisites[0].protocolVersion", 3, "prerequisites[0].protocolVersion", "must be 2, got 3"),
    ("require_unknown", "prerequisites[1].require", ["nope"], "prerequisites[1].require[0]", 'no prerequisite named "nope"'),
    ("callback_event_unknown", "prerequisites[1].callbacks[0].event", "start", "prerequisites[1].callbacks[0].event", 'must be one of containerStart, taskStarts, containerExit, taskSucceeds; got "start"'),
    ("callback_without_commands", "prerequisites[1].callbacks[0].commands", DELETE, "prerequisites[1].callbacks[0].commands", "is required"),
    ("failure_policy_unknown", "prerequisites[1].failurePolicy", "retry", "prerequisites[1].failurePolicy", 'must be one of ignore, fail; got "retry"'),
    ("deployment_name_repeated", "deployments", [{"name": "prod", "taskRoles": {"worker": {}}}, {"name": "prod", "taskRoles": {"worker": {}}}], "deployments[1].name", 'duplicate deployment name "prod"'),
    ("deployment_role_unknown", "deployments[0].taskRoles.ps", {}, "deployments[0].taskRoles.ps", 'no task role named "ps"'),
    ("pre_commands_a_string", "deployments[0].taskRoles.worker.preCommands", "x", "deployments[0].taskRoles.worker.preCommands", 'must be a list of strings, got "x"'),
    ("default_deployment_unknown", "defaults.deployment", "dev", "defaults.deployment", 'no deployment named "dev"'),
    ("reference_to_unknown_parameter", "taskRoles.worker.commands[0]", "run <% $parameters.modell %>", "taskRoles.worker.commands[0]", "unknown reference $parameters.modell"),
    ("reference_to_unknown_secret", "taskRoles.worker.commands[0]", "<% $secrets.tokn %>", "taskRoles.worker.commands[0]", "unknown reference $secrets.tokn"),
    ("reference_to_uri_out_of_range", "taskRoles.worker.commands[0]", "<% $data.uri[2] %>", "taskRoles.worker.commands[0]", "unknown reference $data.uri[2]"),
    ("reference_to_unknown_attribute", "taskRoles.worker.commands[0]", "<% $script.author %>", "taskRoles.worker.commands[0]", "unknown reference $script.author"),
    ("reference_to_data_without_data", "taskRoles.worker.data", DELETE, "taskRoles.worker.commands[0]", None),
    ("reference_malformed", "taskRoles.worker.commands[0]", "<% parameters.model %>", "taskRoles.worker.commands[0]", "malformed reference <% parameters.model %>"),
    ("this_outside_a_callback", "taskRoles.worker.commands[0]", "<% this.parameters.uri %>", "taskRoles.worker.commands[0]", "unknown reference this.parameters.uri (only inside a prerequisite's callbacks)"),
    ("secret_reference_in_auth_unknown", "prerequisites[0].auth", {"password": "<% $secrets.pw %>"}, "prerequisites[0].auth.password", "unknown reference $secrets.pw"),
]  # fmt: skip


def issues_of(document: dict[str, object]) -> list[ProtocolIssue]:
    with pytest.raises(ProtocolError) as caught:
        normalise(document)
    return caught.value.issues


def test_the_sample_job_is_valid() -> None:
    assert normalise(V2_JOB).source_format == "v2"


@pytest.mark.parametrize(
    ("path", "value", "issue_path", "message"),
    [case[1:] for case in CASES if case[4] is not None],
    ids=[case[0] for case in CASES if case[4] is not None],
)
def test_a_broken_rule_is_reported_with_its_path_and_message(
    path: str, value: object, issue_path: str, message: str
) -> None:
    document = CALLBACK if path.startswith("prerequisites[1].callbacks") else V2_JOB
    assert issues_of(changed(document, path, value)) == [ProtocolIssue(issue_path, message)]


def test_a_reference_to_data_in_a_role_without_data_says_the_role_selects_none() -> None:
    document = changed(V2_JOB, "taskRoles.worker.commands", ["ls <% $data.name %>"])
    document = changed(document, "deployments", DELETE)
    document = changed(document, "defaults", DELETE)
    assert issues_of(changed(document, "taskRoles.worker.data", DELETE)) == [
        ProtocolIssue(
            "taskRoles.worker.commands[0]",
            "unknown reference $data.name (task role worker selects no data)",
        )
    ]


def test_a_role_name_that_is_not_a_c_identifier_is_refused() -> None:
    roles = {"1st": V2_JOB["taskRoles"]["worker"]}
    document = changed(changed(V2_JOB, "taskRoles", roles), "deployments", DELETE)
    document = changed(document, "defaults", DELETE)
    assert issues_of(document) == [
        ProtocolIssue("taskRoles.1st", "a task role name must match ^[a-zA-Z_][a-zA-Z0-9_]*$")
    ]


def test_a_requirement_cycle_is_reported_once_with_its_members() -> None:
    assert issues_of(CYCLE) == [
        ProtocolIssue("prerequisites[1].require", "requirement cycle: mnist -> code -> mnist")
    ]


def test_every_issue_is_reported_at_once() -> None:
    document = changed(V2_JOB, "name", "bad name")
    document = changed(document, "taskRoles.worker.resourcePerInstance.gpu", -1)
    document = changed(document, "jobRetryCount", None)
    document = changed(document, "extra", 1)
    assert [i.path for i in issues_of(document)] == [
        "extra",
        "jobRetryCount",
        "name",
        "taskRoles.worker.resourcePerInstance.gpu",
    ]


def test_the_error_text_is_one_line_per_issue_with_path_first() -> None:
    error = ProtocolError([ProtocolIssue("name", "is required"), ProtocolIssue("", "whole")])
    assert str(error) == "name: is required\nwhole"


def test_protocol_version_may_be_the_string_2() -> None:
    assert normalise(changed(V2_JOB, "protocolVersion", "2")).job["protocolVersion"] == 2


def test_a_null_completion_count_takes_its_default() -> None:
    document = changed(V2_JOB, "taskRoles.worker.completion", {"minFailedInstances": None})
    assert normalise(document).job["taskRoles"]["worker"]["completion"]["minFailedInstances"] == 1


def test_defaults_fill_the_canonical_form() -> None:
    minimal = {
        "protocolVersion": 2,
        "name": "m",
        "type": "job",
        "prerequisites": [{"name": "img", "type": "dockerimage", "uri": "ubuntu"}],
        "taskRoles": {
            "main": {
                "dockerImage": "img",
                "resourcePerInstance": {"cpu": 1, "memoryMB": 512, "gpu": 0},
                "commands": ["true"],
            }
        },
    }
    assert normalise(minimal).job == {
        "protocolVersion": 2,
        "name": "m",
        "type": "job",
        "prerequisites": [{"name": "img", "type": "dockerimage", "uri": "ubuntu"}],
        "parameters": {},
        "secrets": {},
        "jobRetryCount": 0,
        "taskRoles": {
            "main": {
                "instances": 1,
                "completion": {"minFailedInstances": 1, "minSucceededInstances": 1},
                "taskRetryCount": 0,
                "dockerImage": "img",
                "extraContainerOptions": {"shmMB": 64, "infiniband": False},
                "resourcePerInstance": {"cpu": 1, "memoryMB": 512, "gpu": 0, "ports": {}},
                "commands": ["true"],
            }
        },
        "deployments": [],
        "defaults": {},
        "extras": {},
    }


def test_extras_may_hold_anything() -> None:
    extras = {"hivedscheduler": {"jobPriorityClass": "prod"}, "anything": [1, None, {"x": 2}]}
    assert normalise(changed(V2_JOB, "extras", extras)).job["extras"] == extras


def test_a_role_listing_one_dockerimage_prerequisite_needs_no_docker_image_field() -> None:
    document = changed(V2_JOB, "taskRoles.worker.dockerImage", DELETE)
    document = changed(document, "taskRoles.worker.prerequisites", ["image"])
    assert normalise(document).job["taskRoles"]["worker"]["dockerImage"] == "image"


def test_a_prerequisite_keeps_its_plugin_specific_keys() -> None:
    document = changed(V2_JOB, "prerequisites[1].mountPoint", "/data")
    assert normalise(document).job["prerequisites"][1]["mountPoint"] == "/data"


def test_a_repeated_prerequisite_name_is_refused_and_the_first_one_counts() -> None:
    document = changed(V2_JOB, "taskRoles.worker.output", DELETE)
    assert issues_of(changed(document, "prerequisites[3].name", "code")) == [
        ProtocolIssue(
            "prerequisites[3].name", "duplicate prerequisite name (also prerequisites[2])"
        )
    ]
