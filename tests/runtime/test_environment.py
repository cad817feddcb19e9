"""Every variable of seeds 002/003 and the OpenPAI runtime, seen from inside real tasks."""

from __future__ import annotations

import textwrap

import pytest

from jobs import lifecycle
from jobs.models import Task
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
    taskRoles:
      taskrole_1:
        instances: 2
        completion: {minFailedInstances: 2, minSucceededInstances: 2}
        dockerImage: image
        resourcePerInstance: {cpu: 1, memoryMB: 128, gpu: 0, ports: {http: 1, ssh: 1}}
        commands: [env]
      ps:
        instances: 1
        dockerImage: image
        resourcePerInstance: {cpu: 2, memoryMB: 256, gpu: 0, ports: {http: 2}}
        commands: [env]
    """)


def test_a_two_role_job_sees_every_variable(alice, backend):
    job = settle(backend, lifecycle.submit(alice, TWO_ROLES))
    assert job.state == JobState.SUCCEEDED
    tasks = {f"{t.role}-{t.index}": t for t in Task.objects.filter(attempt__job=job)}
    t1 = tasks["taskrole_1-1"]
    env = env_of(backend.read_log(t1.backend_ref, "stdout").decode())
    ps, t0 = tasks["ps-0"], tasks["taskrole_1-0"]
    expected = {
        "PAI_JOB_NAME": "env_dump",
        "PAI_USER_NAME": "alice",
        "PAI_DEFAULT_FS_URI": "",
        "PAI_JOB_VC_NAME": "default",
        "PAI_VIRTUAL_CLUSTER": "default",
        "PAI_TASK_ROLE_COUNT": "2",
        "PAI_TASK_ROLE_LIST": "taskrole_1,ps",
        "PAI_TASK_ROLE_TASK_COUNT_taskrole_1": "2",
        "PAI_TASK_ROLE_TASK_COUNT_ps": "1",
        "PAI_JOB_TASK_COUNT": "3",
        "PAI_HOST_IP_taskrole_1_0": t0.ip,
        "PAI_HOST_IP_taskrole_1_1": t1.ip,
        "PAI_HOST_IP_ps_0": ps.ip,
        "PAI_PORT_LIST_taskrole_1_0_ssh": str(t0.ports["ssh"][0]),
        "PAI_PORT_LIST_ps_0_http": ",".join(map(str, ps.ports["http"])),
        "PAI_RESOURCE_taskrole_1": "0,1,128,64",
        "PAI_RESOURCE_ps": "0,2,256,64",
        "PAI_MIN_FAILED_TASK_COUNT_taskrole_1": "2",
        "PAI_MIN_SUCCEEDED_TASK_COUNT_taskrole_1": "2",
        "PAI_MIN_FAILED_TASK_COUNT_ps": "1",
        "PAI_CURRENT_TASK_ROLE_NAME": "taskrole_1",
        "PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX": "1",
        "PAI_CURRENT_TASK_ROLE_TASK_COUNT": "2",
        "PAI_CURRENT_TASK_ROLE_CPU_COUNT": "1",
        "PAI_CURRENT_TASK_ROLE_MEM_MB": "128",
        "PAI_CURRENT_TASK_ROLE_GPU_COUNT": "0",
        "PAI_TASK_ROLE_taskrole_1_HOST_LIST": f"{t0.ip}:{t0.ports['http'][0]},"
        f"{t1.ip}:{t1.ports['http'][0]}",
        "PAI_TASK_ROLE_ps_HOST_LIST": f"{ps.ip}:{ps.ports['http'][0]}",
        "PAI_CONTAINER_HOST_IP": t1.ip,
        "PAI_CONTAINER_HOST_PORT_LIST": f"http:{t1.ports['http'][0]};ssh:{t1.ports['ssh'][0]}",
        "PAI_CONTAINER_HOST_http_PORT_LIST": str(t1.ports["http"][0]),
        "PAI_CONTAINER_HOST_ssh_PORT_LIST": str(t1.ports["ssh"][0]),
        "PAI_CONTAINER_SSH_PORT": str(t1.ports["ssh"][0]),
        "PAI_KILL_ALL_ON_COMPLETED_TASK_NUM": "0",
        "PAI_WORK_DIR": str(backend.root / t1.backend_ref),
        "LEARNING_RATE": "0.1",
        "isDebug": "false",
    }
    for name, value in expected.items():
        assert env.get(name) == value, name


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
        "QIZHI_WORK_DIR": str(backend.root / task.backend_ref),
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
