"""The environment of each task: seed 002's ``PAI_*`` names, the OpenPAI runtime's, and for
v1 jobs seed 003's ``QIZHI_*`` aliases, the v1 directories and ``jobEnvs``.

OpenPAI's names are those its rest-server (``runtime-env.js``, ``k8s.js``, and for the older
names ``templates/yarnContainerScript.mustache``) and its runtime (``framework_parser.py``) set,
with their values: ``PAI_JOB_NAME`` and ``PAI_FRAMEWORK_NAME`` are ``user~job`` (v1 jobs keep
seed 002's bare ``jobName`` in ``PAI_JOB_NAME``); a task's main port
(``PAI_CURRENT_CONTAINER_PORT``, ``PAI_CONTAINER_HOST_PORT``, the host lists) is its ``http``
port, as OpenPAI's, else its first one. Where OpenPAI differs from the seeds the seeds win:
``PAI_RESOURCE_*`` and ``PAI_RESOURCE`` end with seed 002's 64 MB ``shmMB`` default where a role
sets none (``runtime-env.js`` gives 0, a v2 job on yarn 512), role names keep their ``_``
(``taskrole_1``, which OpenPAI's runtime turns into ``taskrole1``). ``PAI_DEFAULT_FS_URI`` is
always set: where the job's first storage (``teamwise_storage``) is seen inside the task, else
"" (``runtime-env.js`` sets it "" on Kubernetes; yarn gave its HDFS URI).

The yarn script's names for the current task, which OpenPAI's SDKs and examples still read:
``PAI_TASK_ROLE_NAME``, ``PAI_TASK_ROLE_NUM`` (the role's instances), ``PAI_TASK_CPU_NUM``,
``PAI_TASK_MEM_MB``, ``PAI_TASK_GPU_NUM``, ``PAI_RESOURCE`` (``gpu,cpu,memoryMB,shmMB`` of its
role) and ``PAI_TASK_ROLE_INDEX``. That last one is the index of the task *within its role*:
OpenPAI's docs disagree (a kube-runtime design doc calls it the index of the role), but the
code sets ``PAI_TASK_ROLE_INDEX=$TASK_INDEX`` (yarnContainerScript.mustache) and its readers
use it so (paipdb builds ``PAI_HOST_IP_<role>_<PAI_TASK_ROLE_INDEX>``). Per role,
``PAI_MIN_FAILED_INSTANCE_<role>`` / ``PAI_MIN_SUCCEEDED_INSTANCE_<role>`` are the rest-lite
design's names for ``minFailedInstances`` / ``minSucceededInstances`` (the values of
``PAI_MIN_*_TASK_COUNT_<role>``). ``PAI_DATA_DIR``, ``PAI_OUTPUT_DIR`` and ``PAI_CODE_DIR`` are
a v1 job's directories and "" in a v2 job (``yarn.js`` renders the yarn script for v2 jobs with
no ``dataDir``/``outputDir``/``codeDir``).

``PAI_CONTAINER_ID`` names the task's container (yarn: its ``CONTAINER_ID``); openpaisdk's
``in_job_container()`` reads a non-empty one as "inside a job". Here it is the attempt's key,
the role, the index and ``-r<retry>`` after a retry (``container_id``): unique to each run of
each task and the same when a launch is repeated. ``PAI_AMD_VISIBLE_DEVICES`` is where OpenPAI
(``k8s.js``, with HiveD) lists a task's AMD GPUs for job-exporter; the backends here hand out
NVIDIA GPUs only (``NVIDIA_VISIBLE_DEVICES`` / ``CUDA_VISIBLE_DEVICES`` are the backend's), so
a task has no AMD GPU and it is "".

``PAI_WORK_DIR`` is set by the bootstrap script itself (it is the task's working directory).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from backends.base import Placement, StorageMount
from protocol.jobenvs import why_skipped

TaskKey = tuple[str, int]


@dataclass(frozen=True)
class JobContext:
    user: str
    job_name: str
    virtual_cluster: str
    protocol: dict[str, Any]
    deployment: str | None = None
    ssh_private_key: str = ""  # the job's key pair (ssh plugin), empty without jobssh
    ssh_public_key: str = ""
    storages: dict[str, str] = field(default_factory=dict)  # name -> where it lives here
    storage_mounts: list[StorageMount] = field(default_factory=list)  # for the backend
    barrier_timeout: int = 600
    debug_keep_hours: int = 0  # > 0 when jobEnvs.isDebug keeps a failed task's directory


def env_name(part: str) -> str:
    """A role or label as it appears inside a variable name (v1 names may hold . ~ -)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", part)


def main_port(placement: Placement) -> str:
    """A task's main port: its first ``http`` port (OpenPAI's), else its first port, else ""."""
    labelled = [placement.ports.get("http") or [], *placement.ports.values()]
    return next((str(ports[0]) for ports in labelled if ports), "")


def host_port(placement: Placement) -> str:
    """``ip:port`` of a task's main port, or the bare ip when it declares none."""
    port = main_port(placement)
    return f"{placement.ip}:{port}" if port else placement.ip


def shm_mb(spec: dict[str, Any]) -> int:
    """A role's ``shmMB`` (seed 002's default: 64)."""
    value: int = spec.get("extraContainerOptions", {}).get("shmMB", 64)
    return value


def resource(spec: dict[str, Any]) -> str:
    """A role's ``gpu,cpu,memoryMB,shmMB`` (``PAI_RESOURCE_<role>``, ``PAI_RESOURCE``)."""
    res = spec["resourcePerInstance"]
    return f"{res['gpu']},{res['cpu']},{res['memoryMB']},{shm_mb(spec)}"


def is_v1(protocol: dict[str, Any]) -> bool:
    return isinstance(protocol.get("extras", {}).get("v1"), dict)


def container_id(attempt_key: str, role: str, index: int, retry: int = 0) -> str:
    """``PAI_CONTAINER_ID`` of one run of a task: unique per attempt, task and retry."""
    return f"{attempt_key}-{role}-{index}" + (f"-r{retry}" if retry else "")


def task_environment(
    ctx: JobContext,
    placements: dict[TaskKey, Placement],
    role: str,
    index: int,
    container: str = "",
) -> dict[str, str]:
    """The variables of task ``role``/``index``; ``container`` is its ``PAI_CONTAINER_ID``
    (``container_id``), else one made from the job's name (for callers without an attempt)."""
    roles: dict[str, Any] = ctx.protocol["taskRoles"]
    spec = roles[role]
    resources = spec["resourcePerInstance"]
    completion = spec["completion"]
    mine = placements[(role, index)]
    framework_name = f"{ctx.user}~{ctx.job_name}"
    task_count = str(sum(r["instances"] for r in roles.values()))
    env: dict[str, str] = {
        "PAI_JOB_NAME": ctx.job_name if is_v1(ctx.protocol) else framework_name,
        "PAI_FRAMEWORK_NAME": framework_name,
        "PAI_USER_NAME": ctx.user,
        "PAI_USERNAME": ctx.user,
        "PAI_DEFAULT_FS_URI": next(iter(ctx.storages.values()), ""),
        "PAI_JOB_VC_NAME": ctx.virtual_cluster,
        "PAI_VIRTUAL_CLUSTER": ctx.virtual_cluster,
        "PAI_TASK_ROLE_COUNT": str(len(roles)),
        "PAI_TASK_ROLES_NUM": str(len(roles)),
        "PAI_JOB_TASK_ROLE_COUNT": str(len(roles)),
        "PAI_TASK_ROLE_LIST": ",".join(roles),
        "PAI_JOB_TASK_ROLE_LIST": ",".join(roles),
        "PAI_JOB_TASK_COUNT": task_count,
        "PAI_TASKS_NUM": task_count,
        "PAI_TASK_ROLE_INSTANCES": ",".join(
            f"{env_name(name)}:{i}"
            for name, other in roles.items()
            for i in range(other["instances"])
        ),
        "PAI_CURRENT_TASK_ROLE_NAME": role,
        "PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX": str(index),
        "PAI_TASK_INDEX": str(index),
        "PAI_CURRENT_TASK_ROLE_TASK_COUNT": str(spec["instances"]),
        "PAI_CURRENT_TASK_ROLE_CPU_COUNT": str(resources["cpu"]),
        "PAI_CURRENT_TASK_ROLE_MEM_MB": str(resources["memoryMB"]),
        "PAI_CURRENT_TASK_ROLE_GPU_COUNT": str(resources["gpu"]),
        "PAI_CURRENT_TASK_ROLE_SHM_MB": str(shm_mb(spec)),
        "PAI_CURRENT_TASK_ROLE_MIN_FAILED_TASK_COUNT": str(completion["minFailedInstances"]),
        "PAI_CURRENT_TASK_ROLE_MIN_SUCCEEDED_TASK_COUNT": str(completion["minSucceededInstances"]),
        # the yarn script's names for the same (yarnContainerScript.mustache)
        "PAI_TASK_ROLE_NAME": role,
        "PAI_TASK_ROLE_INDEX": str(index),  # within the role (see the module's docstring)
        "PAI_TASK_ROLE_NUM": str(spec["instances"]),
        "PAI_TASK_CPU_NUM": str(resources["cpu"]),
        "PAI_TASK_MEM_MB": str(resources["memoryMB"]),
        "PAI_TASK_GPU_NUM": str(resources["gpu"]),
        "PAI_RESOURCE": resource(spec),
        "PAI_CONTAINER_ID": container or container_id(framework_name, role, index),
        "PAI_AMD_VISIBLE_DEVICES": "",  # no backend here hands out AMD GPUs
        "PAI_CURRENT_CONTAINER_IP": mine.ip,
        "PAI_CURRENT_CONTAINER_PORT": main_port(mine),
        "PAI_CONTAINER_HOST_IP": mine.ip,
        "PAI_CONTAINER_HOST_PORT": main_port(mine),
        "PAI_CONTAINER_HOST_PORT_LIST": ";".join(
            f"{label}:{','.join(map(str, ports))}" for label, ports in mine.ports.items()
        ),
        "PAI_CONTAINER_SSH_PORT": str(mine.ports["ssh"][0]) if mine.ports.get("ssh") else "",
        "PAI_KILL_ALL_ON_COMPLETED_TASK_NUM": str(kill_all_number(ctx.protocol)),
        # v1 jobs' directories (v1_environment); a v2 job has none, as on OpenPAI (yarn.js)
        "PAI_DATA_DIR": "",
        "PAI_OUTPUT_DIR": "",
        "PAI_CODE_DIR": "",
    }
    for label, ports in mine.ports.items():
        env[f"PAI_CONTAINER_HOST_{env_name(label)}_PORT_LIST"] = ",".join(map(str, ports))
    for name, other in roles.items():
        key = env_name(name)
        ends = other["completion"]
        env[f"PAI_TASK_ROLE_TASK_COUNT_{key}"] = str(other["instances"])
        env[f"PAI_RESOURCE_{key}"] = resource(other)
        env[f"PAI_MIN_FAILED_TASK_COUNT_{key}"] = str(ends["minFailedInstances"])
        env[f"PAI_MIN_SUCCEEDED_TASK_COUNT_{key}"] = str(ends["minSucceededInstances"])
        env[f"PAI_MIN_FAILED_INSTANCE_{key}"] = str(ends["minFailedInstances"])
        env[f"PAI_MIN_SUCCEEDED_INSTANCE_{key}"] = str(ends["minSucceededInstances"])
        hosts = []
        for i in range(other["instances"]):
            placement = placements[(name, i)]
            hosts.append(host_port(placement))
            env[f"PAI_HOST_IP_{key}_{i}"] = placement.ip
            for label, ports in placement.ports.items():
                listed = ",".join(map(str, ports))
                env[f"PAI_PORT_LIST_{key}_{i}_{env_name(label)}"] = listed
                env[f"PAI_{key}_{i}_{env_name(label)}_PORT"] = listed
        env[f"PAI_TASK_ROLE_{key}_HOST_LIST"] = ",".join(hosts)
    for name in ctx.storages:
        env[f"PAI_STORAGE_{env_name(name)}"] = ctx.storages[name]
    if is_v1(ctx.protocol):
        env.update(v1_environment(env, ctx.protocol["extras"]["v1"]))
    env.update(job_envs(ctx.protocol.get("extras", {}).get("jobEnvs")))
    return env


def kill_all_number(protocol: dict[str, Any]) -> int:
    v1 = protocol.get("extras", {}).get("v1")
    value = v1.get("killAllOnCompletedTaskNumber") if isinstance(v1, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def v1_environment(env: dict[str, str], v1: dict[str, Any]) -> dict[str, str]:
    """Seed 003's ``QIZHI_*`` names and the v1 directories and ``jobEnvs``."""
    # Seeds 002/003: without an outputDir, $PAI_DEFAULT_FS_URI/Output/$jobName.
    fs_uri = env["PAI_DEFAULT_FS_URI"]
    output = v1.get("outputDir") or f"{fs_uri}/Output/{env['PAI_JOB_NAME']}"
    extra: dict[str, str] = {
        "PAI_DATA_DIR": _with_fs_uri(v1.get("dataDir"), fs_uri),
        "PAI_OUTPUT_DIR": _with_fs_uri(output, fs_uri),
        "PAI_CODE_DIR": _with_fs_uri(v1.get("codeDir"), fs_uri),
    }
    for name, value in {**env, **extra}.items():
        if name.startswith("PAI_"):
            extra["QIZHI_" + name[4:]] = value
    extra.update(job_envs(v1.get("jobEnvs")))
    return extra


_FS_URI_REFERENCE = re.compile(
    r"\$(?:\{(?:QIZHI|PAI)_DEFAULT_FS_URI\}|(?:QIZHI|PAI)_DEFAULT_FS_URI\b)"
)


def _with_fs_uri(directory: object, fs_uri: str) -> str:
    """Seed 003's directories are written as ``$QIZHI_DEFAULT_FS_URI/path/...``: the portal
    expands that one name (the variables hold values, not shell text)."""
    return _FS_URI_REFERENCE.sub(lambda _: fs_uri, str(directory or ""))


def job_envs(values: object) -> dict[str, str]:
    """``jobEnvs`` (v1, or ``extras.jobEnvs`` in v2) as variables, except names that are not
    variable names or would replace a ``PAI_*`` / ``QIZHI_*`` one (submission warned)."""
    if not isinstance(values, dict):
        return {}
    return {
        str(name): value if isinstance(value, str) else _json_scalar(value)
        for name, value in values.items()
        if why_skipped(str(name)) is None
    }


def _json_scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)
