"""The teamwise_storage plugin: storages admins define (``clusters.Storage``) mounted by name.

At submit a job may only name storages that exist and its owner may use. At launch each gets
a place in the task: on the local backend a directory (linked at ``$PAI_WORK_DIR/mnt/<name>``
since ``/mnt`` is the machine's own; it refuses other kinds); on Kubernetes a PVC or NFS volume
at ``/mnt/<name>`` (a local-dir only as a hostPath an admin allowed; refused otherwise).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from backends.base import StorageMount
from clusters.models import Storage
from jobs.errors import SubmitError
from jobs.plugins import storage_names


def check_access(user: AbstractBaseUser, protocol: dict[str, Any]) -> None:
    """Raise ``SubmitError`` (400 unknown, 403 not allowed) naming each storage refused."""
    names = storage_names(protocol)
    if not names:
        return
    known = {s.name: s for s in Storage.objects.filter(name__in=names)}
    where = "extras.com.microsoft.pai.runtimeplugin.teamwise_storage.storageConfigNames"
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SubmitError(400, [f"{where}: no storage named {n!r}" for n in unknown])
    refused = [n for n in names if not known[n].usable_by(user)]
    if refused:
        raise SubmitError(403, [f"{where}: you may not use storage {n!r}" for n in refused])


def mounts(protocol: dict[str, Any]) -> list[StorageMount]:
    """The storages the job names, as the backend mounts them (in the job's order)."""
    names = storage_names(protocol)
    found = {s.name: s for s in Storage.objects.filter(name__in=names)}
    return [
        StorageMount(
            name=name,
            kind=found[name].kind,
            path=found[name].path,
            server=found[name].server,
            claim_name=found[name].claim_name,
            read_only=found[name].read_only,
        )
        for name in names
        if name in found
    ]


def locations(storages: list[StorageMount], backend_name: str = "local") -> dict[str, str]:
    """name -> where the storage is seen inside a task (``PAI_STORAGE_<name>``, and the target
    of ``$PAI_WORK_DIR/mnt/<name>``): ``/mnt/<name>`` on Kubernetes; on the local backend the
    directory itself ("" for a kind it cannot mount: the backend refuses the launch)."""
    if backend_name == "kubernetes":
        return {s.name: f"/mnt/{s.name}" for s in storages}
    return {s.name: s.path if s.kind == Storage.LOCAL_DIR else "" for s in storages}
