"""The environment each task gets."""

from __future__ import annotations

from backends.base import Placement
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
    from jobs.runtime import script as runtime
    from protocol import RoleCommands

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


def test_every_name_built_from_task_role_instances_exists():
    """OpenPAI's scripts (ssh barrier, Horovod host lists) read ``PAI_TASK_ROLE_INSTANCES`` as
    ``role:index`` pairs and look up ``PAI_HOST_IP_<role>_<index>``: v1 role names such as
    ``task.role~1`` appear there as in the variable names."""
    p = protocol()
    p["taskRoles"] = {"task.role~1": p["taskRoles"]["taskrole_1"], "ps": p["taskRoles"]["ps"]}
    placements = {
        ("task.role~1", i) if r == "taskrole_1" else (r, i): v for (r, i), v in PLACEMENTS.items()
    }
    env = task_environment(JobContext("alice", "j", "default", p), placements, "ps", 0)
    assert env["PAI_TASK_ROLE_INSTANCES"] == "task_role_1:0,task_role_1:1,ps:0"
    for pair in env["PAI_TASK_ROLE_INSTANCES"].split(","):
        role, index = pair.split(":")
        assert env[f"PAI_HOST_IP_{role}_{index}"]
        assert env[f"PAI_{role}_{index}_http_PORT"] == env[f"PAI_PORT_LIST_{role}_{index}_http"]


def test_the_main_port_is_http_as_in_openpai_and_addresses_may_be_dns_names():
    """On Kubernetes a task's address is its DNS name; the current container's port, like the
    host lists, is its ``http`` port whatever the order the ports are declared in."""
    placements = {
        ("taskrole_1", 0): Placement("taskrole-1-0.pai-a1", {"ssh": [2000], "http": [2001]}),
        ("taskrole_1", 1): Placement("taskrole-1-1.pai-a1", {"ssh": [2000], "http": [2001]}),
        ("ps", 0): Placement("ps-0.pai-a1", {"grpc": [2002, 2003]}),
    }
    ctx = JobContext("alice", "j", "default", protocol())
    env = task_environment(ctx, placements, "taskrole_1", 1)
    assert env["PAI_CURRENT_CONTAINER_IP"] == env["PAI_CONTAINER_HOST_IP"] == "taskrole-1-1.pai-a1"
    assert env["PAI_CURRENT_CONTAINER_PORT"] == env["PAI_CONTAINER_HOST_PORT"] == "2001"
    assert env["PAI_TASK_ROLE_taskrole_1_HOST_LIST"] == (
        "taskrole-1-0.pai-a1:2001,taskrole-1-1.pai-a1:2001"
    )
    ps = task_environment(ctx, placements, "ps", 0)
    assert ps["PAI_CURRENT_CONTAINER_PORT"] == "2002"  # no http port: its first port
    assert ps["PAI_TASK_ROLE_ps_HOST_LIST"] == "ps-0.pai-a1:2002"
    assert ps["PAI_JOB_NAME"] == ps["PAI_FRAMEWORK_NAME"] == "alice~j"
    assert ps["PAI_DEFAULT_FS_URI"] == ""
