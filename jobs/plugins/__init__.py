"""OpenPAI's runtime plugins, read from ``extras["com.microsoft.pai.runtimeplugin"]``.

A list of ``{plugin: <name>, parameters: {...}, taskroles: [...]}`` entries: ``ssh``
(``jobssh``, ``userssh``), ``cmd`` (``callbacks`` on ``taskStarts`` / ``taskSucceeds``, or
``preCommands`` / ``postCommands``) and ``teamwise_storage`` (``storageConfigNames``). The
``debug`` plugin is ``jobEnvs.isDebug`` (v1 ``jobEnvs`` or v2 ``extras.jobEnvs``). Pure Python.

Each plugin is in one place: ``ssh/`` (its keys, and its part of a task's bootstrap script),
``storage.py`` (``teamwise_storage``: checked at submit, mounted at launch), ``tensorboard.py``
(its part of the bootstrap script); ``cmd`` is read here and run by ``jobs.runtime.script``.
"""

from __future__ import annotations

from typing import Any

EXTRAS_KEY = "com.microsoft.pai.runtimeplugin"


def runtime_plugins(protocol: dict[str, Any], role: str | None = None) -> list[dict[str, Any]]:
    """The plugin entries of the job (those that apply to ``role`` when given)."""
    entries = (protocol.get("extras") or {}).get(EXTRAS_KEY) or []
    found = []
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("plugin"), str):
            continue
        roles = entry.get("taskroles") or entry.get("taskRoles")
        if role is not None and isinstance(roles, list) and role not in roles:
            continue
        found.append(entry)
    return found


def parameters(entry: dict[str, Any]) -> dict[str, Any]:
    value = entry.get("parameters")
    return value if isinstance(value, dict) else {}


def _commands(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [str(c) for c in value] if isinstance(value, list) else []


def cmd_commands(protocol: dict[str, Any], role: str) -> tuple[list[str], list[str]]:
    """The ``cmd`` plugin's commands for ``role``: (before the commands, after a success)."""
    pre: list[str] = []
    post: list[str] = []
    for entry in runtime_plugins(protocol, role):
        if entry["plugin"] != "cmd":
            continue
        params = parameters(entry)
        pre += _commands(params.get("preCommands"))
        post += _commands(params.get("postCommands"))
        for callback in params.get("callbacks") or []:
            if not isinstance(callback, dict):
                continue
            if callback.get("event") == "taskStarts":
                pre += _commands(callback.get("commands"))
            elif callback.get("event") == "taskSucceeds":
                post += _commands(callback.get("commands"))
    return pre, post


def storage_names(protocol: dict[str, Any]) -> list[str]:
    names: list[str] = []
    for entry in runtime_plugins(protocol):
        if entry["plugin"] == "teamwise_storage":
            for name in parameters(entry).get("storageConfigNames") or []:
                if str(name) not in names:
                    names.append(str(name))
    return names


def uses_ssh(protocol: dict[str, Any], role: str) -> bool:
    """Whether the job turns OpenPAI's ssh runtime plugin on for ``role``."""
    return any(entry["plugin"] == "ssh" for entry in runtime_plugins(protocol, role))


def ssh_options(protocol: dict[str, Any]) -> tuple[bool, str]:
    """(``jobssh``, the user's public key from ``userssh``)."""
    jobssh = False
    user_key = ""
    for entry in runtime_plugins(protocol):
        if entry["plugin"] != "ssh":
            continue
        params = parameters(entry)
        jobssh = jobssh or params.get("jobssh") is True
        userssh = params.get("userssh")
        if isinstance(userssh, dict) and isinstance(userssh.get("value"), str):
            user_key = userssh["value"].strip() or user_key
        elif isinstance(userssh, str):
            user_key = userssh.strip() or user_key
    return jobssh, user_key


def is_debug(protocol: dict[str, Any]) -> bool:
    extras = protocol.get("extras") or {}
    v1 = extras.get("v1")
    v1_envs = v1.get("jobEnvs") if isinstance(v1, dict) else None
    for envs in (v1_envs, extras.get("jobEnvs")):
        if isinstance(envs, dict) and envs.get("isDebug") in (True, "true", "True"):
            return True
    return False
