"""The environment of each task: seed 002's ``PAI_*`` names, the OpenPAI runtime's, and for
v1 jobs seed 003's ``QIZHI_*`` aliases, the v1 directories and ``jobEnvs``.

``PAI_WORK_DIR`` is set by the bootstrap script itself (it is the task's working directory).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from clusters.backends.base import Placement, StorageMount
from jobs.protocol.jobenvs import why_skipped

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


def host_port(placement: Placement) -> str:
    """``ip:port`` of a task's first port, or the bare ip when it declares none."""
    for ports in placement.ports.values():
        if ports:
            return f"{placement.ip}:{ports[0]}"
    return placement.ip


def task_environment(
    ctx: JobContext, placements: dict[TaskKey, Placement], role: str, index: int
) -> dict[str, str]:
    roles: dict[str, Any] = ctx.protocol["taskRoles"]
    spec = roles[role]
    resources = spec["resourcePerInstance"]
    mine = placements[(role, index)]
    env: dict[str, str] = {
        "PAI_JOB_NAME": ctx.job_name,
        "PAI_USER_NAME": ctx.user,
        "PAI_DEFAULT_FS_URI": "",
        "PAI_JOB_VC_NAME": ctx.virtual_cluster,
        "PAI_VIRTUAL_CLUSTER": ctx.virtual_cluster,
        "PAI_TASK_ROLE_COUNT": str(len(roles)),
        "PAI_TASK_ROLE_LIST": ",".join(roles),
        "PAI_JOB_TASK_COUNT": str(sum(r["instances"] for r in roles.values())),
        "PAI_CURRENT_TASK_ROLE_NAME": role,
        "PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX": str(index),
        "PAI_CURRENT_TASK_ROLE_TASK_COUNT": str(spec["instances"]),
        "PAI_CURRENT_TASK_ROLE_CPU_COUNT": str(resources["cpu"]),
        "PAI_CURRENT_TASK_ROLE_MEM_MB": str(resources["memoryMB"]),
        "PAI_CURRENT_TASK_ROLE_GPU_COUNT": str(resources["gpu"]),
        "PAI_CONTAINER_HOST_IP": mine.ip,
        "PAI_CONTAINER_HOST_PORT_LIST": ";".join(
            f"{label}:{','.join(map(str, ports))}" for label, ports in mine.ports.items()
        ),
        "PAI_CONTAINER_SSH_PORT": str(mine.ports["ssh"][0]) if mine.ports.get("ssh") else "",
        "PAI_KILL_ALL_ON_COMPLETED_TASK_NUM": str(kill_all_number(ctx.protocol)),
    }
    for label, ports in mine.ports.items():
        env[f"PAI_CONTAINER_HOST_{env_name(label)}_PORT_LIST"] = ",".join(map(str, ports))
    for name, other in roles.items():
        key = env_name(name)
        res = other["resourcePerInstance"]
        shm = other.get("extraContainerOptions", {}).get("shmMB", 64)
        completion = other["completion"]
        env[f"PAI_TASK_ROLE_TASK_COUNT_{key}"] = str(other["instances"])
        env[f"PAI_RESOURCE_{key}"] = f"{res['gpu']},{res['cpu']},{res['memoryMB']},{shm}"
        env[f"PAI_MIN_FAILED_TASK_COUNT_{key}"] = str(completion["minFailedInstances"])
        env[f"PAI_MIN_SUCCEEDED_TASK_COUNT_{key}"] = str(completion["minSucceededInstances"])
        hosts = []
        for i in range(other["instances"]):
            placement = placements[(name, i)]
            hosts.append(host_port(placement))
            env[f"PAI_HOST_IP_{key}_{i}"] = placement.ip
            for label, ports in placement.ports.items():
                env[f"PAI_PORT_LIST_{key}_{i}_{env_name(label)}"] = ",".join(map(str, ports))
        env[f"PAI_TASK_ROLE_{key}_HOST_LIST"] = ",".join(hosts)
    for name in ctx.storages:
        env[f"PAI_STORAGE_{env_name(name)}"] = ctx.storages[name]
    v1 = ctx.protocol.get("extras", {}).get("v1")
    if isinstance(v1, dict):
        env.update(v1_environment(env, v1))
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
    extra["QIZHI_JOB_TASK_ROLE_COUNT"] = env["PAI_TASK_ROLE_COUNT"]
    extra["QIZHI_JOB_TASK_ROLE_LIST"] = env["PAI_TASK_ROLE_LIST"]
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
