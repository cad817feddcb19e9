"""What a task starts with on this machine: its script, its environment, the command of its
sandbox and its image (``LocalBackend.launch`` puts them together in the task's directory)."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from backends.base import StorageKind, TaskLaunch
from backends.local import cgroups, disk, gpus, images, sandbox
from backends.local.taskdir import IMAGE, WORK, write_private

UNSANDBOXED = (
    "echo \"[portal] this task runs unsandboxed, as the portal's own user with the machine in"
    ' view (bwrap is missing, or LOCAL_SANDBOX is off)" >&2\n'
)
IMAGE_WITHOUT_STORAGES = (
    'echo "[portal] this task mounts storages, which are not in view inside an image on the'
    ' local backend: it runs on the system of the machine, not in its dockerImage" >&2\n'
)
log = logging.getLogger(__name__)


class LocalBackendError(RuntimeError):
    """A task cannot be launched on this machine (e.g. not enough free GPUs)."""


def refuse_storages(task: TaskLaunch) -> None:
    """Only directories of this machine can be mounted here (linked by the script)."""
    for store in task.storages:
        if store.kind != StorageKind.LOCAL_DIR:
            raise LocalBackendError(
                f"storage {store.name!r} is a {store.kind} storage; the local backend can only "
                "mount local-dir storages (ask an admin, or run the job on Kubernetes)"
            )
        if not store.path:
            raise LocalBackendError(f"storage {store.name!r} has no directory configured")


def is_sandboxed(config: sandbox.SandboxConfig, task: TaskLaunch) -> bool:
    """Whether the task runs in the sandbox; refuses it when the sandbox tool is missing,
    unless the owner is an admin (an admin's own task then runs unsandboxed)."""
    if not config.enabled:
        return False
    if sandbox.bwrap_path(config):
        return True
    if task.owner_is_admin:
        log.warning("bwrap is missing: the admin's task %s runs unsandboxed", task.role)
        return False
    raise LocalBackendError(
        "tasks run in a sandbox and its tool, bwrap (the Debian package bubblewrap), is "
        "not installed on this machine; an admin installs it (`make install`)"
    )


def script_of(config: sandbox.SandboxConfig, task: TaskLaunch, sandboxed: bool) -> str:
    """The task's bootstrap script: never silently unsandboxed nor out of its image, the
    task's log says so first."""
    if not sandboxed:
        return UNSANDBOXED + task.script
    if wants_image(config, task) and task.storages:
        return IMAGE_WITHOUT_STORAGES + task.script
    return task.script


def wants_image(config: sandbox.SandboxConfig, task: TaskLaunch) -> bool:
    return config.images == "charliecloud" and bool(task.image)


def prepare_image(config: sandbox.SandboxConfig, task: TaskLaunch, control: Path) -> str | None:
    """The image the task runs in (LOCAL_IMAGES=charliecloud and a dockerImage), else None;
    its registry credentials in a file of the portal's for the pull (images.PULL)."""
    if not wants_image(config, task) or task.storages:  # no storage in view in an image
        return None
    if not shutil.which("ch-image") or not shutil.which("ch-run"):
        raise LocalBackendError(
            "tasks run in their dockerImage (LOCAL_IMAGES=charliecloud) and Charliecloud "
            "(ch-image, ch-run) is not installed on this machine; an admin installs it "
            "(`make charliecloud`)"
        )
    write_private(control / IMAGE, task.image)
    if task.pull_secret:
        write_private(control / images.REGISTRY_AUTH, images.registry_auth_file(task.pull_secret))
    return task.image


def sandbox_command(
    config: sandbox.SandboxConfig,
    task_path: str,
    task_root: Path,
    task: TaskLaunch,
    ref: str,
    task_gpus: list[gpus.GPU] | None,
    identity: sandbox.TaskIdentity | None,
    hierarchy: cgroups.Hierarchy,
    image: str | None = None,
) -> list[str]:
    """The command that runs the task's bootstrap in its sandbox (and its image), as its uid,
    in its cgroups; ``task_root`` holds every task's control directory, ``ref`` this one's."""
    if not os.access(sandbox.PRELUDE, os.X_OK):
        raise LocalBackendError(
            f"the sandbox's prelude {sandbox.PRELUDE} is not built: an admin runs `make install`"
        )
    control = task_root / ref
    passwd_file = "/etc/passwd"  # noqa: S105 - the system's, as it is
    if identity is not None:
        write_private(control / sandbox.PASSWD, sandbox.passwd_with(identity))
        passwd_file = str(control / sandbox.PASSWD)
    procs = cgroups.create(
        hierarchy, ref, cgroups.Limits(task.memory_mb, task.cpu, config.pids_max)
    )
    cgroups.warm_attach(hierarchy)  # for the task's join, soon
    limits = sandbox.rlimits(task.memory_mb, config.nofile, "memory" in hierarchy.controllers)
    bootstrap = control / "bootstrap.sh"
    storage = config.image_storage
    image_dir = str(images.image_dir(storage, image)) if image else None
    gates = {}
    if identity is not None:
        sources = sandbox.bind_sources(config, control / WORK, task.storages)
        gates = sandbox.make_gates(ref, [*sources, *([image_dir] if image_dir else [])])
    args = sandbox.bwrap_args(
        config,
        task_path,
        control / WORK,
        bootstrap,
        task_gpus,
        task.storages,
        task.shm_mb,
        passwd=identity is not None,
        gates=gates,
        task_root=task_root,  # the other tasks' directories
        image=(image_dir, images.IMAGE_MOUNT) if image_dir else None,
        command=images.enter_command(bootstrap, control / WORK) if image else None,
    )
    privileges = sandbox.drop_privileges(identity)
    detach = task_root if disk.is_mount_point(task_root) else None  # with the others' disks
    command = sandbox.task_command(
        bootstrap, passwd_file, procs, limits, privileges, args, gates, detach
    )
    if image is None:
        return command
    return images.pull_command(storage, image, command)


def environment(
    task_path: str,
    task: TaskLaunch,
    work: Path,
    task_gpus: list[gpus.GPU] | None,
    identity: sandbox.TaskIdentity | None,
    *,
    sandboxed: bool,
) -> dict[str, str]:
    """The task's environment, built from nothing: none of the portal's own variables
    (database URL, secret key, passwords) reaches a task. ``task_path`` is the tasks' PATH;
    ``task_gpus`` are named as CUDA numbers them in the task (``gpus.environment``)."""
    env = {"PATH": task_path, "LANG": "C.UTF-8", "HOME": str(work)}
    if identity is not None:
        env["USER"] = env["LOGNAME"] = identity.name
    env.update(task.env)
    env.setdefault("PAI_WORK_DIR", str(work))
    env.update(gpus.environment(task_gpus, sandboxed))
    return env
