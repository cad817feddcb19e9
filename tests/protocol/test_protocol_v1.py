"""v1 JSON jobs: their rules, and how they map onto the canonical v2 form."""

# ruff: noqa: E501 - the tables of cases read best one case a line
from __future__ import annotations

import json

import pytest
from protocol_samples import DELETE, EXAMPLES, V1_JOB, changed

from protocol import ProtocolError, ProtocolIssue, dump_yaml, load_job, normalise

CASES = [
    ("job_name_with_a_space", "jobName", "my job", "jobName", 'must match ^[A-Za-z0-9\\-._~]+$, got "my job"'),
    ("job_name_missing", "jobName", DELETE, "jobName", "is required"),
    ("image_missing", "image", DELETE, "image", "is required"),
    ("task_roles_empty", "taskRoles", [], "taskRoles", "must have at least one task role"),
    ("role_name_with_a_dash", "taskRoles[0].name", "a-b", "taskRoles[0].name", 'must match ^[A-Za-z0-9._~]+$, got "a-b"'),
    ("task_number_zero", "taskRoles[0].taskNumber", 0, "taskRoles[0].taskNumber", "must be an integer >= 1, got 0"),
    ("cpu_number_zero", "taskRoles[0].cpuNumber", 0, "taskRoles[0].cpuNumber", "must be an integer >= 1, got 0"),
    ("memory_below_100", "taskRoles[0].memoryMB", 99, "taskRoles[0].memoryMB", "must be an integer >= 100, got 99"),
    ("gpu_number_negative", "taskRoles[0].gpuNumber", -1, "taskRoles[0].gpuNumber", "must be an integer >= 0, got -1"),
    ("gpu_number_true", "taskRoles[0].gpuNumber", True, "taskRoles[0].gpuNumber", "must be an integer >= 0, got true"),
    ("shm_zero", "taskRoles[0].shmMB", 0, "taskRoles[0].shmMB", "must be an integer >= 1, got 0"),
    ("port_label_with_a_space", "taskRoles[0].portList[0].label", "a b", "taskRoles[0].portList[0].label", 'must match ^[A-Za-z0-9._~]+$, got "a b"'),
    ("port_begin_negative", "taskRoles[0].portList[0].beginAt", -1, "taskRoles[0].portList[0].beginAt", "must be an integer >= 0, got -1"),
    ("port_number_zero", "taskRoles[0].portList[0].portNumber", 0, "taskRoles[0].portList[0].portNumber", "must be an integer >= 1, got 0"),
    ("command_empty", "taskRoles[0].command", "  ", "taskRoles[0].command", "must not be empty"),
    ("command_missing", "taskRoles[0].command", DELETE, "taskRoles[0].command", "is required"),
    ("min_failed_zero", "taskRoles[0].minFailedTaskCount", 0, "taskRoles[0].minFailedTaskCount", "must be an integer >= 1, got 0"),
    ("min_succeeded_above_tasks", "taskRoles[0].minSucceededTaskCount", 3, "taskRoles[0].minSucceededTaskCount", "must not be more than taskNumber (2), got 3"),
    ("kill_all_negative", "killAllOnCompletedTaskNumber", -1, "killAllOnCompletedTaskNumber", "must be an integer >= 0, got -1"),
    ("retry_count_below_minus_two", "retryCount", -3, "retryCount", "must be -2, -1 or an integer >= 0, got -3"),
    ("job_envs_a_list", "jobEnvs", [], "jobEnvs", "must be an object, got a list"),
    ("is_debug_as_text", "jobEnvs", {"isDebug": "yes"}, "jobEnvs.isDebug", 'must be true or false, got "yes"'),
    ("data_dir_a_number", "dataDir", 3, "dataDir", "must be a string, got 3"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("path", "value", "issue_path", "message"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_a_broken_v1_rule_is_reported_with_its_path_and_message(
    path: str, value: object, issue_path: str, message: str
) -> None:
    with pytest.raises(ProtocolError) as caught:
        normalise(changed(V1_JOB, path, value))
    assert caught.value.issues == [ProtocolIssue(issue_path, message)]


def test_a_repeated_v1_role_name_is_refused() -> None:
    roles = [V1_JOB["taskRoles"][0], V1_JOB["taskRoles"][0]]
    with pytest.raises(ProtocolError) as caught:
        normalise(changed(V1_JOB, "taskRoles", roles))
    assert caught.value.issues == [
        ProtocolIssue("taskRoles[1].name", 'duplicate task role name "main"')
    ]


def test_a_repeated_v1_port_label_is_refused() -> None:
    port = V1_JOB["taskRoles"][0]["portList"][0]
    with pytest.raises(ProtocolError) as caught:
        normalise(changed(V1_JOB, "taskRoles[0].portList", [port, port]))
    assert caught.value.issues == [
        ProtocolIssue("taskRoles[0].portList[1].label", 'duplicate port label "http"')
    ]


def test_the_helloworld_job_maps_onto_the_canonical_form() -> None:
    loaded = load_job((EXAMPLES / "002_helloworld.json").read_text())
    assert loaded.source_format == "v1"
    job = dict(loaded.job)
    ignored = job["extras"]["v1"].pop("ignored")
    assert set(ignored) == {"tmp", "taskRoles[0].storageGB"}
    assert job == {
        "protocolVersion": 2,
        "name": "helloworld_16be675e",
        "type": "job",
        "prerequisites": [
            {"name": "image", "type": "dockerimage", "uri": "sitonholy/tensorflow:16.04-9.0-3.5-1.8.0"}
        ],
        "parameters": {},
        "secrets": {},
        "jobRetryCount": 0,
        "taskRoles": {
            "task_1": {
                "instances": 1,
                "completion": {"minFailedInstances": -1, "minSucceededInstances": -1},
                "taskRetryCount": 0,
                "dockerImage": "image",
                "extraContainerOptions": {"shmMB": 64, "infiniband": False},
                "resourcePerInstance": {"cpu": 1, "memoryMB": 8192, "gpu": 1, "ports": {}},
                "commands": ["nvidia-smi"],
            }
        },
        "deployments": [],
        "defaults": {},
        "extras": {
            "v1": {
                "jobName": "helloworld_16be675e",
                "authFile": "",
                "dataDir": "",
                "outputDir": "",
                "codeDir": "",
                "gpuType": "TITANX",
                "jobEnvs": {},
            }
        },
    }  # fmt: skip


def test_absent_v1_completion_counts_take_the_v2_defaults() -> None:
    role = normalise(V1_JOB).job["taskRoles"]["main"]
    assert role["completion"] == {"minFailedInstances": 1, "minSucceededInstances": 2}


def test_v1_ports_keep_their_counts_and_their_begin_at_values() -> None:
    job = normalise(changed(V1_JOB, "taskRoles[0].portList[0].beginAt", 8080)).job
    assert job["taskRoles"]["main"]["resourcePerInstance"]["ports"] == {"http": 1}
    assert job["extras"]["v1"]["beginAt"] == {"main": {"http": 8080}}


def test_v1_only_fields_are_kept_under_extras_v1() -> None:
    document = {
        **V1_JOB,
        "killAllOnCompletedTaskNumber": 1,
        "jobEnvs": {"isDebug": True, "LR": 0.1},
        "virtualCluster": "vc1",
        "retryCount": 2,
        "extras": {"mine": 1},
    }
    job = normalise(document).job
    assert job["extras"] == {
        "mine": 1,
        "v1": {
            "jobName": "demo.job~1",
            "killAllOnCompletedTaskNumber": 1,
            "jobEnvs": {"isDebug": True, "LR": 0.1},
            "beginAt": {"main": {"http": 0}},
        },
    }
    assert job["defaults"] == {"virtualCluster": "vc1"} and job["jobRetryCount"] == 2


def test_a_v1_job_keeps_v1_names_even_through_a_yaml_export() -> None:
    document = changed(V1_JOB, "taskRoles[0].name", "main.0~x")
    job = normalise(document).job
    assert job["name"] == "demo.job~1" and list(job["taskRoles"]) == ["main.0~x"]
    assert load_job(dump_yaml(job)).job == job


def test_a_v1_job_written_in_yaml_is_still_v1() -> None:
    text = "jobName: y\nimage: ubuntu\ntaskRoles:\n- {name: a, taskNumber: 1, cpuNumber: 1,"
    text += " memoryMB: 100, gpuNumber: 0, command: 'true'}\n"
    assert load_job(text).source_format == "v1"


def test_a_v1_job_with_extras_v1_of_its_own_is_refused() -> None:
    with pytest.raises(ProtocolError, match=r"extras\.v1: is reserved"):
        normalise({**V1_JOB, "extras": {"v1": {}}})


def test_unknown_v1_keys_warn_instead_of_failing() -> None:
    loaded = load_job(json.dumps({**V1_JOB, "tmp": {"x": 1}}))
    assert loaded.warnings == ["tmp: not a field of the v1 job format; kept in extras.v1.ignored"]
    assert loaded.job["extras"]["v1"]["ignored"] == {"tmp": {"x": 1}}
