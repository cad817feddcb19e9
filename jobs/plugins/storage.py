"""The teamwise_storage plugin: storages admins define (``clusters.Storage``) mounted by name.

At submit a job may only name storages that exist and its owner may use. At launch each gets
a place in the task: on the local backend a directory (linked at ``$PAI_WORK_DIR/mnt/<name>``
since ``/mnt`` is the machine's own); other kinds are for the Kubernetes backend (``""`` here).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from clusters.models import Storage
from jobs.plugins import storage_names


def check_access(user: AbstractBaseUser, protocol: dict[str, Any]) -> None:
    """Raise ``SubmitError`` (400 unknown, 403 not allowed) naming each storage refused."""
    from jobs.lifecycle import SubmitError

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


def locations(protocol: dict[str, Any]) -> dict[str, str]:
    """name -> directory for the local backend ("" for a kind it cannot mount)."""
    names = storage_names(protocol)
    found = {s.name: s for s in Storage.objects.filter(name__in=names)}
    return {
        name: found[name].path if found[name].kind == Storage.LOCAL_DIR else ""
        for name in names
        if name in found
    }
