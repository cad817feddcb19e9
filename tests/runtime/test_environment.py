"""Every variable of seeds 002/003 and the OpenPAI runtime, seen from inside real tasks."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from backends.base import Placement
from clusters.models import Storage
from jobs import lifecycle
from jobs.models import Task
from jobs.runtime import JobContext, task_environment
from jobs.runtime.env import container_id
from jobs.states import JobState
from tests.jobs.helpers import env_of, settle
from tests.jobs.samples import v1_job

pytestmark = pytest.mark.django_db(transaction=True)

TWO_ROLES = textwrap.dedent("""\
    protocolVersion: 2
    name: env_dump
    type: job
    prerequisites:
      - {name: image, type: dockerimage, uri: "python:3.11"}
    extras:
      jobEnvs: {isDebug: false, LEARNING_RATE: "0.1"}
      com.microsoft.pai.runtimeplugin:
        - plugin: teamwise_storage
          parameters: {storageConfigNames: [share, scratch]}
    taskRoles:
      taskrole_1:
        instances: 2
        completion: {minFailedInstances: 2, minSucceededInstances: 2}
        dockerImage: image
        resourcePerInstance: {cpu: 1, memoryMB: 128, gpu: 0, ports: {ssh: 1, http: 1}}
        commands: [env]
      ps:
        instances: 1
        dockerImage: image
        extraContainerOptions: {shmMB: 32}
        resourcePerInstance: {cpu: 2, memoryMB: 256, gpu: 0, ports: {http: 2}}
        commands: [env]
    """)


def listed(ports: list[int]) -> str:
    return ",".join(map(str, ports))


def expected_environment(
    tasks: dict[str, Task], task: Task, storages: Path, work: Path
) -> dict[str, str]:
    """Every ``PAI_*`` variable the task must see, with its value: OpenPAI's rest-server
    (``runtime-env.js``, ``k8s.js``, ``yarnContainerScript.mustache``) and runtime
    (``framework_parser.py``) names, seed 002's."""
    t0, t1, ps = tasks["taskrole_1-0"], tasks["taskrole_1-1"], tasks["ps-0"]
    role_spec = {
        "taskrole_1": {"cpu": "1", "mem": "128", "shm": "64", "count": "2", "fail": "2"},
        "ps": {"cpu": "2", "mem": "256", "shm": "32", "count": "1", "fail": "1"},
    }[task.role]
    resource = {"taskrole_1": "0,1,128,64", "ps": "0,2,256,32"}
    main_port = str(task.ports["http"][0])
    env = {
        # Job level
        "PAI_JOB_NAME": "alice~env_dump",
        "PAI_FRAMEWORK_NAME": "alice~env_dump",
        "PAI_USER_NAME": "alice",
        "PAI_USERNAME": "alice",
        "PAI_DEFAULT_FS_URI": str(storages / "share"),  # the job's first storage
        "PAI_JOB_VC_NAME": "default",
        "PAI_VIRTUAL_CLUSTER": "default",
        "PAI_JOB_TASK_COUNT": "3",
        "PAI_TASKS_NUM": "3",
        "PAI_KILL_ALL_ON_COMPLETED_TASK_NUM": "0",
        "PAI_STORAGE_share": str(storages / "share"),
        "PAI_STORAGE_scratch": str(storages / "scratch"),
        "PAI_DATA_DIR": "",  # v1 jobs' directories: none in a v2 job (OpenPAI's yarn.js)
        "PAI_OUTPUT_DIR": "",
        "PAI_CODE_DIR": "",
        # Task role level
        "PAI_TASK_ROLE_COUNT": "2",
        "PAI_TASK_ROLES_NUM": "2",
        "PAI_JOB_TASK_ROLE_COUNT": "2",
        "PAI_TASK_ROLE_LIST": "taskrole_1,ps",
        "PAI_JOB_TASK_ROLE_LIST": "taskrole_1,ps",
        "PAI_TASK_ROLE_INSTANCES": "taskrole_1:0,taskrole_1:1,ps:0",
        "PAI_TASK_ROLE_TASK_COUNT_taskrole_1": "2",
        "PAI_TASK_ROLE_TASK_COUNT_ps": "1",
        "PAI_RESOURCE_taskrole_1": resource["taskrole_1"],
        "PAI_RESOURCE_ps": resource["ps"],
        "PAI_MIN_FAILED_TASK_COUNT_taskrole_1": "2",
        "PAI_MIN_SUCCEEDED_TASK_COUNT_taskrole_1": "2",
        "PAI_MIN_FAILED_TASK_COUNT_ps": "1",
        "PAI_MIN_SUCCEEDED_TASK_COUNT_ps": "1",
        "PAI_MIN_FAILED_INSTANCE_taskrole_1": "2",  # the rest-lite design's names
        "PAI_MIN_SUCCEEDED_INSTANCE_taskrole_1": "2",
        "PAI_MIN_FAILED_INSTANCE_ps": "1",
        "PAI_MIN_SUCCEEDED_INSTANCE_ps": "1",
        "PAI_TASK_ROLE_taskrole_1_HOST_LIST": f"{t0.ip}:{t0.ports['http'][0]},"
        f"{t1.ip}:{t1.ports['http'][0]}",
        "PAI_TASK_ROLE_ps_HOST_LIST": f"{ps.ip}:{ps.ports['http'][0]}",
        # Current task role and task
        "PAI_CURRENT_TASK_ROLE_NAME": task.role,
        "PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX": str(task.index),
        "PAI_TASK_INDEX": str(task.index),
        "PAI_CURRENT_TASK_ROLE_TASK_COUNT": role_spec["count"],
        "PAI_CURRENT_TASK_ROLE_CPU_COUNT": role_spec["cpu"],
        "PAI_CURRENT_TASK_ROLE_MEM_MB": role_spec["mem"],
        "PAI_CURRENT_TASK_ROLE_SHM_MB": role_spec["shm"],
        "PAI_CURRENT_TASK_ROLE_GPU_COUNT": "0",
        "PAI_CURRENT_TASK_ROLE_MIN_FAILED_TASK_COUNT": role_spec["fail"],
        "PAI_CURRENT_TASK_ROLE_MIN_SUCCEEDED_TASK_COUNT": role_spec["count"],
        # The yarn script's names (yarnContainerScript.mustache)
        "PAI_TASK_ROLE_NAME": task.role,
        "PAI_TASK_ROLE_INDEX": str(task.index),  # the task's index within its role
        "PAI_TASK_ROLE_NUM": role_spec["count"],
        "PAI_TASK_CPU_NUM": role_spec["cpu"],
        "PAI_TASK_MEM_MB": role_spec["mem"],
        "PAI_TASK_GPU_NUM": "0",
        "PAI_RESOURCE": resource[task.role],
        "PAI_CONTAINER_ID": f"{task.attempt.key}-{task.role}-{task.index}",
        "PAI_AMD_VISIBLE_DEVICES": "",  # no AMD GPUs on these backends
        "PAI_CURRENT_CONTAINER_IP": task.ip,
        "PAI_CURRENT_CONTAINER_PORT": main_port,
        "PAI_CONTAINER_HOST_IP": task.ip,
        "PAI_CONTAINER_HOST_PORT": main_port,
        "PAI_CONTAINER_HOST_PORT_LIST": ";".join(
            f"{label}:{listed(ports)}" for label, ports in task.ports.items()
        ),
        "PAI_CONTAINER_SSH_PORT": str(task.ports["ssh"][0]) if "ssh" in task.ports else "",
        "PAI_WORK_DIR": str(work / task.backend_ref / "work"),
    }
    for label, ports in task.ports.items():
        env[f"PAI_CONTAINER_HOST_{label}_PORT_LIST"] = listed(ports)
    for other in tasks.values():
        env[f"PAI_HOST_IP_{other.role}_{other.index}"] = other.ip
        for label, ports in other.ports.items():
            env[f"PAI_PORT_LIST_{other.role}_{other.index}_{label}"] = listed(ports)
            env[f"PAI_{other.role}_{other.index}_{label}_PORT"] = listed(ports)
    return env


def test_a_two_role_job_sees_every_variable(alice, backend, tmp_path):
    for name in ("share", "scratch"):
        (tmp_path / name).mkdir()
        Storage.objects.create(name=name, path=str(tmp_path / name), open_to_all=True)
    job = settle(backend, lifecycle.submit(alice, TWO_ROLES))
    assert job.state == JobState.SUCCEEDED
    tasks = {f"{t.role}-{t.index}": t for t in Task.objects.filter(attempt__job=job)}
    assert sorted(tasks) == ["ps-0", "taskrole_1-0", "taskrole_1-1"]
    for task in tasks.values():
        printed = env_of(backend.read_log(task.backend_ref, "stdout").decode())
        seen = {name: value for name, value in printed.items() if name.startswith("PAI_")}
        assert seen == expected_environment(tasks, task, tmp_path, backend.root), task
        assert len(seen) >= 53  # every name OpenPAI's components set (issue 29 counted 53)
        assert printed["LEARNING_RATE"] == "0.1"
        assert printed["isDebug"] == "false"
        assert not any(name.startswith("QIZHI_") for name in printed)  # v1 jobs only


def test_a_v1_job_also_sees_the_qizhi_names_and_its_directories(alice, backend):
    import json

    v1 = {
        "jobName": "env_v1",
        "image": "python:3.11",
        "dataDir": "/data/in",
        "outputDir": "/data/out",
        "codeDir": "/code",
        "killAllOnCompletedTaskNumber": 1,
        "jobEnvs": {"isDebug": False, "MODE": "fast"},
        "taskRoles": [
            {
                "name": "taskrole_1",
                "taskNumber": 1,
                "cpuNumber": 1,
                "memoryMB": 128,
                "gpuNumber": 0,
                "portList": [{"label": "http", "beginAt": 0, "portNumber": 1}],
                "command": "env",
            },
        ],
    }
    job = settle(backend, lifecycle.submit(alice, json.dumps(v1)))
    task = Task.objects.get(attempt__job=job)
    env = env_of(backend.read_log(task.backend_ref, "stdout").decode())
    http = str(task.ports["http"][0])
    for name, value in {
        "QIZHI_JOB_NAME": "env_v1",
        "PAI_JOB_NAME": "env_v1",  # seed 002: a v1 job's jobName, not OpenPAI's user~job
        "PAI_FRAMEWORK_NAME": "alice~env_v1",
        "QIZHI_FRAMEWORK_NAME": "alice~env_v1",
        "PAI_USERNAME": "alice",
        "PAI_TASK_INDEX": "0",
        "PAI_TASK_ROLE_INSTANCES": "taskrole_1:0",
        "PAI_DEFAULT_FS_URI": "",  # set, empty without a storage (runtime-env.js)
        "PAI_TASK_ROLE_NAME": "taskrole_1",
        "QIZHI_TASK_ROLE_NAME": "taskrole_1",
        "PAI_TASK_ROLE_INDEX": "0",
        "PAI_TASK_ROLE_NUM": "1",
        "PAI_TASK_CPU_NUM": "1",
        "PAI_TASK_MEM_MB": "128",
        "PAI_TASK_GPU_NUM": "0",
        "PAI_RESOURCE": "0,1,128,64",
        "PAI_MIN_FAILED_INSTANCE_taskrole_1": "1",
        "PAI_MIN_SUCCEEDED_INSTANCE_taskrole_1": "1",
        "PAI_CONTAINER_ID": f"{task.attempt.key}-taskrole_1-0",
        "QIZHI_CONTAINER_ID": f"{task.attempt.key}-taskrole_1-0",
        "PAI_AMD_VISIBLE_DEVICES": "",
        "PAI_CURRENT_CONTAINER_IP": task.ip,
        "PAI_CURRENT_CONTAINER_PORT": http,
        "PAI_taskrole_1_0_http_PORT": http,
        "QIZHI_USER_NAME": "alice",
        "QIZHI_DEFAULT_FS_URI": "",
        "QIZHI_CURRENT_TASK_ROLE_CPU_COUNT": "1",
        "QIZHI_CURRENT_TASK_ROLE_MEM_MB": "128",
        "QIZHI_CURRENT_TASK_ROLE_GPU_COUNT": "0",
        "QIZHI_CONTAINER_HOST_IP": task.ip,
        "QIZHI_CONTAINER_HOST_PORT_LIST": f"http:{http}",
        "QIZHI_CONTAINER_HOST_http_PORT_LIST": http,
        "PAI_CONTAINER_HOST_http_PORT_LIST": http,
        "QIZHI_JOB_VC_NAME": "default",
        "QIZHI_DATA_DIR": "/data/in",
        "PAI_DATA_DIR": "/data/in",
        "QIZHI_OUTPUT_DIR": "/data/out",
        "PAI_OUTPUT_DIR": "/data/out",
        "QIZHI_CODE_DIR": "/code",
        "PAI_CODE_DIR": "/code",
        "QIZHI_CURRENT_TASK_ROLE_NAME": "taskrole_1",
        "QIZHI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX": "0",
        "QIZHI_CURRENT_TASK_ROLE_TASK_COUNT": "1",
        "QIZHI_JOB_TASK_COUNT": "1",
        "QIZHI_JOB_TASK_ROLE_COUNT": "1",
        "QIZHI_JOB_TASK_ROLE_LIST": "taskrole_1",
        "QIZHI_TASK_ROLE_taskrole_1_HOST_LIST": f"{task.ip}:{http}",
        "QIZHI_KILL_ALL_ON_COMPLETED_TASK_NUM": "1",
        "PAI_KILL_ALL_ON_COMPLETED_TASK_NUM": "1",
        "QIZHI_WORK_DIR": str(backend.work_dir(task.backend_ref)),
        "MODE": "fast",
    }.items():
        assert env.get(name) == value, name


def test_a_v1_job_without_an_output_dir_gets_the_default_and_jobenvs_replace_no_system_name(
    alice, backend
):
    import json

    v1 = v1_job(
        "env_v1_default",
        "env",
        jobEnvs={"PAI_JOB_NAME": "mine", "QIZHI_USER_NAME": "mallory", "MODE": "fast"},
        extras={"jobEnvs": {"PAI_OUTPUT_DIR": "/elsewhere"}},
    )
    job = lifecycle.submit(alice, json.dumps(v1))
    warnings = list(job.events.filter(kind="warning").values_list("message", flat=True))
    assert [w.split(":")[0] for w in warnings] == [
        "extras.jobEnvs.PAI_OUTPUT_DIR",
        "jobEnvs.PAI_JOB_NAME",
        "jobEnvs.QIZHI_USER_NAME",
    ]
    assert "may not be replaced" in warnings[0]
    settle(backend, job)
    env = env_of(
        backend.read_log(Task.objects.get(attempt__job=job).backend_ref, "stdout").decode()
    )
    for name, value in {
        "PAI_OUTPUT_DIR": "/Output/env_v1_default",  # $PAI_DEFAULT_FS_URI is empty here
        "QIZHI_OUTPUT_DIR": "/Output/env_v1_default",
        "PAI_JOB_NAME": "env_v1_default",
        "QIZHI_USER_NAME": "alice",
        "MODE": "fast",
    }.items():
        assert env.get(name) == value, name


def test_a_v1_job_writes_under_its_first_storage_by_default(alice, backend, tmp_path):
    """Seed 002: ``outputDir`` defaults to ``$PAI_DEFAULT_FS_URI/Output/$jobName``, and the
    default file system is the storage the job names first."""
    import json

    results = tmp_path / "results"
    results.mkdir(mode=0o777)
    results.chmod(0o777)  # the task's uid writes in it
    Storage.objects.create(name="results", path=str(results), open_to_all=True)
    plugin = {"plugin": "teamwise_storage", "parameters": {"storageConfigNames": ["results"]}}
    command = 'mkdir -p "$PAI_OUTPUT_DIR" && echo done > "$PAI_OUTPUT_DIR/model.txt" && env'
    v1 = v1_job("env_v1_fs", command, extras={"com.microsoft.pai.runtimeplugin": [plugin]})
    job = settle(backend, lifecycle.submit(alice, json.dumps(v1)))
    assert job.state == JobState.SUCCEEDED
    task = Task.objects.get(attempt__job=job)
    env = env_of(backend.read_log(task.backend_ref, "stdout").decode())
    output = f"{results}/Output/env_v1_fs"
    for name, value in {
        "PAI_DEFAULT_FS_URI": str(results),
        "QIZHI_DEFAULT_FS_URI": str(results),
        "PAI_OUTPUT_DIR": output,
        "QIZHI_OUTPUT_DIR": output,
        "PAI_JOB_NAME": "env_v1_fs",
    }.items():
        assert env.get(name) == value, name
    assert (results / "Output" / "env_v1_fs" / "model.txt").read_text() == "done\n"


def pure_environment(role: str, index: int, **kwargs: Any) -> dict[str, str]:
    """``task_environment`` of a job of two roles (``taskrole_1`` x2 with no shmMB, ``ps`` x1
    with 1 GPU and shmMB 32) under attempt ``k7``, without running it."""
    roles = {
        "taskrole_1": {
            "instances": 2,
            "completion": {"minFailedInstances": 2, "minSucceededInstances": 1},
            "resourcePerInstance": {"cpu": 3, "memoryMB": 1024, "gpu": 0, "ports": {}},
        },
        "ps": {
            "instances": 1,
            "completion": {"minFailedInstances": 1, "minSucceededInstances": -1},
            "extraContainerOptions": {"shmMB": 32},
            "resourcePerInstance": {"cpu": 2, "memoryMB": 512, "gpu": 1, "ports": {}},
        },
    }
    protocol = {"name": "pure", "taskRoles": roles, "extras": kwargs.pop("extras", {})}
    placements = {
        ("taskrole_1", 0): Placement("10.0.0.1", {}),
        ("taskrole_1", 1): Placement("10.0.0.2", {}),
        ("ps", 0): Placement("10.0.0.3", {}),
    }
    ctx = JobContext("alice", "pure", "default", protocol, **kwargs)
    return task_environment(ctx, placements, role, index, container_id("k7", role, index))


def test_the_yarn_scripts_current_task_names_hold_openpais_values():
    """yarnContainerScript.mustache: PAI_TASK_ROLE_NAME/NUM, PAI_TASK_CPU_NUM/MEM_MB/GPU_NUM and
    PAI_RESOURCE (``gpu,cpu,memoryMB,shmMB``) describe the current task's role."""
    ps = pure_environment("ps", 0)
    for name, value in {
        "PAI_TASK_ROLE_NAME": "ps",
        "PAI_TASK_ROLE_NUM": "1",
        "PAI_TASK_CPU_NUM": "2",
        "PAI_TASK_MEM_MB": "512",
        "PAI_TASK_GPU_NUM": "1",
        "PAI_RESOURCE": "1,2,512,32",
    }.items():
        assert ps.get(name) == value, name
    worker = pure_environment("taskrole_1", 1)
    assert (worker["PAI_TASK_ROLE_NAME"], worker["PAI_TASK_ROLE_NUM"]) == ("taskrole_1", "2")
    assert (worker["PAI_TASK_CPU_NUM"], worker["PAI_TASK_MEM_MB"]) == ("3", "1024")
    # Seed 002's shmMB default (64) where the role sets none; OpenPAI's runtime-env.js gives 0.
    assert worker["PAI_RESOURCE"] == worker["PAI_RESOURCE_taskrole_1"] == "0,3,1024,64"


def test_pai_task_role_index_is_the_tasks_index_within_its_role_as_openpais_yarn_script_sets():
    """``PAI_TASK_ROLE_INDEX=$TASK_INDEX`` (yarnContainerScript.mustache), read so by paipdb
    (``PAI_HOST_IP_<role>_<PAI_TASK_ROLE_INDEX>``), not the role's place in the job."""
    assert pure_environment("taskrole_1", 1)["PAI_TASK_ROLE_INDEX"] == "1"
    ps = pure_environment("ps", 0)  # the second role (role index 1), its first task
    assert ps["PAI_TASK_ROLE_INDEX"] == "0"
    assert ps[f"PAI_HOST_IP_ps_{ps['PAI_TASK_ROLE_INDEX']}"] == "10.0.0.3"


def test_min_failed_and_succeeded_instance_per_role_mirror_the_completion_policy():
    """The rest-lite design's ``PAI_MIN_FAILED_INSTANCE_<role>`` /
    ``PAI_MIN_SUCCEEDED_INSTANCE_<role>``: the role's minFailed/minSucceeded instances."""
    env = pure_environment("ps", 0)
    assert env["PAI_MIN_FAILED_INSTANCE_taskrole_1"] == "2"
    assert env["PAI_MIN_SUCCEEDED_INSTANCE_taskrole_1"] == "1"
    assert env["PAI_MIN_FAILED_INSTANCE_ps"] == env["PAI_MIN_FAILED_TASK_COUNT_ps"] == "1"
    assert env["PAI_MIN_SUCCEEDED_INSTANCE_ps"] == env["PAI_MIN_SUCCEEDED_TASK_COUNT_ps"] == "-1"


def test_pai_container_id_is_set_for_openpaisdks_in_job_container_and_unique_per_run():
    """openpaisdk's ``in_job_container()`` tests a non-empty ``PAI_CONTAINER_ID``; yarn gave
    each container its own. Here: one per attempt, task and retry, the same for a repeat."""
    assert pure_environment("taskrole_1", 1)["PAI_CONTAINER_ID"] == "k7-taskrole_1-1"
    ids = {
        container_id("k7", "taskrole_1", 0),
        container_id("k7", "taskrole_1", 1),
        container_id("k7", "ps", 0),
        container_id("k7", "ps", 0, retry=1),
        container_id("k8", "ps", 0),
    }
    assert len(ids) == 5 and all(ids)
    assert container_id("k7", "ps", 0, 1) == container_id("k7", "ps", 0, 1) == "k7-ps-0-r1"


def test_pai_container_id_is_never_empty_even_without_an_attempt():
    role = {
        "instances": 1,
        "completion": {"minFailedInstances": 1, "minSucceededInstances": 1},
        "resourcePerInstance": {"cpu": 1, "memoryMB": 64, "gpu": 0},
    }
    ctx = JobContext("alice", "j", "default", {"taskRoles": {"r": role}, "extras": {}})
    env = task_environment(ctx, {("r", 0): Placement("10.0.0.9", {})}, "r", 0)
    assert env["PAI_CONTAINER_ID"] == "alice~j-r-0"


def test_pai_amd_visible_devices_is_empty_as_no_backend_gives_amd_gpus():
    """OpenPAI (k8s.js, HiveD) lists a task's AMD GPUs there for job-exporter, which reads an
    empty value as none; the backends here give NVIDIA GPUs only, even to a GPU task."""
    assert pure_environment("taskrole_1", 0)["PAI_AMD_VISIBLE_DEVICES"] == ""
    assert pure_environment("ps", 0)["PAI_AMD_VISIBLE_DEVICES"] == ""  # 1 (NVIDIA) GPU


def test_pai_default_fs_uri_is_always_set_empty_without_storage_as_openpais_runtime_env():
    """runtime-env.js sets ``PAI_DEFAULT_FS_URI: ''``; a job with a storage gets its place."""
    env = pure_environment("ps", 0)
    assert env.get("PAI_DEFAULT_FS_URI") == ""
    stored = pure_environment("ps", 0, storages={"share": "/mnt/share", "b": "/mnt/b"})
    assert stored["PAI_DEFAULT_FS_URI"] == "/mnt/share"


def test_v2_jobs_see_the_v1_directories_empty_as_openpai_renders_them():
    """yarn.js renders a v2 job's yarn script with no dataDir/outputDir/codeDir: the names are
    set and empty; a v1 job's are its own (and seed 002's default outputDir)."""
    env = pure_environment("ps", 0)
    assert [env.get(f"PAI_{d}_DIR") for d in ("DATA", "OUTPUT", "CODE")] == ["", "", ""]
    v1 = pure_environment("ps", 0, extras={"v1": {"dataDir": "/d", "codeDir": "/c"}})
    assert (v1["PAI_DATA_DIR"], v1["PAI_CODE_DIR"]) == ("/d", "/c")
    assert v1["PAI_OUTPUT_DIR"] == v1["QIZHI_OUTPUT_DIR"] == "/Output/pure"


def test_a_retried_task_runs_under_a_new_container_id_and_still_sees_its_peer(
    alice, backend, shared
):
    """Each run of a task is a container of its own (yarn's CONTAINER_ID): the retry's
    ``PAI_CONTAINER_ID`` is not the first run's. The retry launches one task of an attempt
    whose other task runs, and its environment names that peer all the same (read from the
    database; a new attempt's tasks are all at hand)."""
    record = shared / "ids"
    job_text = textwrap.dedent(f"""\
        protocolVersion: 2
        name: env_retry
        type: job
        prerequisites: [{{name: img, type: dockerimage, uri: python}}]
        taskRoles:
          main:
            instances: 2
            taskRetryCount: 1
            dockerImage: img
            resourcePerInstance: {{cpu: 1, memoryMB: 128, gpu: 0, ports: {{SynPort: 1}}}}
            commands:
              - peer="$PAI_HOST_IP_main_1:$PAI_main_1_SynPort_PORT"
              - echo "$PAI_CONTAINER_ID $peer" >> "{record}"
              - if [ "$PAI_TASK_INDEX" = 1 ]; then sleep 3; exit 0; fi
              - if [ -f "{record}.again" ]; then exit 0; fi
              - touch "{record}.again"
              - exit 1
        """)
    job = settle(backend, lifecycle.submit(alice, job_text))
    assert job.state == JobState.SUCCEEDED
    first, peer = Task.objects.filter(attempt__job=job).order_by("index")
    assert (first.retries, peer.retries) == (1, 0)
    key, address = first.attempt.key, f"{peer.ip}:{peer.ports['SynPort'][0]}"
    assert sorted(record.read_text().splitlines()) == [
        f"{key}-main-0 {address}",
        f"{key}-main-0-r1 {address}",
        f"{key}-main-1 {address}",
    ]


# A job of our own written the way OpenPAI's distributed PyTorch and Horovod examples are: the
# master is worker 0 (``PAI_HOST_IP_worker_0``, ``PAI_worker_0_SynPort_PORT``), the rank is
# ``PAI_TASK_INDEX``, the world size ``PAI_TASK_ROLE_TASK_COUNT_worker``, and a Horovod host
# list is built from ``PAI_TASK_ROLE_INSTANCES``. The workers really meet at the master's port.
DISTRIBUTED = textwrap.dedent("""\
    protocolVersion: 2
    name: ddp_rendezvous
    type: job
    prerequisites:
      - {name: image, type: dockerimage, uri: "pytorch/pytorch:2.1.0-cuda12.1-cudnn8-runtime"}
    taskRoles:
      worker:
        instances: 3
        completion: {minSucceededInstances: 3}
        dockerImage: image
        resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0, ports: {SynPort: 1}}
        commands:
          - export MASTER_ADDR=$PAI_HOST_IP_worker_0 MASTER_PORT=$PAI_worker_0_SynPort_PORT
          - export WORLD_SIZE=$PAI_TASK_ROLE_TASK_COUNT_worker RANK=$PAI_TASK_INDEX
          - |
            hosts=""
            for pair in ${PAI_TASK_ROLE_INSTANCES//,/ }; do
              address=PAI_HOST_IP_${pair%%:*}_${pair##*:}
              hosts="$hosts${hosts:+,}${!address}:1"
            done
          - echo "horovodrun -np $PAI_TASKS_NUM -H $hosts"
          - echo "rank $RANK of $WORLD_SIZE in $PAI_FRAMEWORK_NAME"
          - echo "master $MASTER_ADDR:$MASTER_PORT"
          - |
            python3 - <<'PY'
            import os, socket, time
            rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
            master = (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
            if rank == 0:
                with socket.create_server(master) as server:
                    server.settimeout(120)
                    joined = []
                    for _ in range(world - 1):
                        conn, _ = server.accept()
                        with conn:
                            joined.append(conn.recv(64).decode())
                            conn.sendall(b"welcome")
                print("master met", ",".join(sorted(joined)))
            else:
                me = f"{rank}@{os.environ['PAI_CURRENT_CONTAINER_IP']}"
                for _ in range(1200):
                    try:
                        with socket.create_connection(master, timeout=5) as conn:
                            conn.sendall(me.encode())
                            print("joined:", conn.recv(16).decode())
                            break
                    except OSError:
                        time.sleep(0.1)
                else:
                    raise SystemExit("the master never listened")
            PY
    """)


def test_a_distributed_job_written_for_openpai_meets_at_its_master(alice, backend):
    job = settle(backend, lifecycle.submit(alice, DISTRIBUTED), timeout=120)
    tasks = sorted(Task.objects.filter(attempt__job=job), key=lambda t: t.index)
    outputs = [backend.read_log(t.backend_ref, "stdout").decode().splitlines() for t in tasks]
    assert job.state == JobState.SUCCEEDED, outputs
    master = f"{tasks[0].ip}:{tasks[0].ports['SynPort'][0]}"
    hosts = ",".join(f"{t.ip}:1" for t in tasks)
    for rank, lines in enumerate(outputs):
        assert lines[0] == f"horovodrun -np 3 -H {hosts}"
        assert lines[1:3] == [f"rank {rank} of 3 in alice~ddp_rendezvous", f"master {master}"]
    assert outputs[0][3] == f"master met 1@{tasks[1].ip},2@{tasks[2].ip}"
    assert outputs[1][3] == outputs[2][3] == "joined: welcome"
