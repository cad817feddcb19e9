"""The environment each task gets."""

from __future__ import annotations

from clusters.backends.base import Placement
from jobs.runtime import JobContext, bootstrap_script, env_name, task_environment


def protocol() -> dict:
    def role(instances: int) -> dict:
        return {
            "instances": instances,
            "completion": {"minFailedInstances": 1, "minSucceededInstances": instances},
            "extraContainerOptions": {"shmMB": 64},
            "resourcePerInstance": {"cpu": 2, "memoryMB": 512, "gpu": 1, "ports": {"http": 1}},
            "commands": ["echo hi"],
        }

    return {"name": "j", "taskRoles": {"taskrole_1": role(2), "ps": role(1)}, "extras": {}}


PLACEMENTS = {
    ("taskrole_1", 0): Placement("10.0.0.1", {"http": [1000]}),
    ("taskrole_1", 1): Placement("10.0.0.2", {"http": [1001]}),
    ("ps", 0): Placement("10.0.0.3", {"http": [1002]}),
}


def test_role_names_with_underscores_and_digits_make_valid_variables():
    env = task_environment(JobContext("alice", "j", "default", protocol()), PLACEMENTS, "ps", 0)
    assert env["PAI_TASK_ROLE_taskrole_1_HOST_LIST"] == "10.0.0.1:1000,10.0.0.2:1001"
    assert env["PAI_HOST_IP_taskrole_1_1"] == "10.0.0.2"
    assert env["PAI_PORT_LIST_taskrole_1_0_http"] == "1000"
    assert env["PAI_TASK_ROLE_TASK_COUNT_taskrole_1"] == "2"
    assert env["PAI_RESOURCE_taskrole_1"] == "1,2,512,64"
    assert env["PAI_JOB_TASK_COUNT"] == "3"
    assert env["PAI_TASK_ROLE_LIST"] == "taskrole_1,ps"
    assert env["PAI_CONTAINER_HOST_PORT_LIST"] == "http:1002"


def test_v1_jobs_also_get_qizhi_names_and_job_envs():
    p = protocol()
    p["extras"] = {"v1": {"dataDir": "/data", "jobEnvs": {"isDebug": True, "LR": "0.1"}}}
    env = task_environment(JobContext("alice", "j", "default", p), PLACEMENTS, "ps", 0)
    assert env["QIZHI_CURRENT_TASK_ROLE_NAME"] == "ps"
    assert env["QIZHI_DATA_DIR"] == env["PAI_DATA_DIR"] == "/data"
    assert env["isDebug"] == "true"
    assert env["LR"] == "0.1"


def test_names_that_are_not_shell_identifiers_are_made_safe():
    assert env_name("task.role~1") == "task_role_1"


def test_values_are_quoted_in_the_script(monkeypatch):
    from jobs.protocol import RoleCommands
    from jobs.runtime import script as runtime

    monkeypatch.setattr(runtime, "render_role", lambda *a, **k: RoleCommands([], ["true"], []))
    script = bootstrap_script(
        JobContext("alice", "j", "default", protocol()), "ps", {"X": "a'b; rm -rf /"}
    )
    assert "export X='a'\"'\"'b; rm -rf /'" in script


def test_v1_directories_written_with_the_default_fs_uri_have_it_expanded():
    from jobs.runtime.env import v1_environment

    env = {"PAI_DEFAULT_FS_URI": "hdfs://nn:9000", "PAI_JOB_NAME": "tf", "PAI_TASK_ROLE_COUNT": "1"}
    env["PAI_TASK_ROLE_LIST"] = "main"
    v1 = {
        "dataDir": "$QIZHI_DEFAULT_FS_URI/path/data",
        "outputDir": "${PAI_DEFAULT_FS_URI}/path/output",
        "codeDir": "$QIZHI_DEFAULT_FS_URIX/not/ours",
    }
    extra = v1_environment(env, v1)
    assert extra["PAI_DATA_DIR"] == "hdfs://nn:9000/path/data"
    assert extra["QIZHI_OUTPUT_DIR"] == "hdfs://nn:9000/path/output"
    assert extra["PAI_CODE_DIR"] == "$QIZHI_DEFAULT_FS_URIX/not/ours"
