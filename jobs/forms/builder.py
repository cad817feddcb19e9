"""The submit page's form: its POST data becomes a v2 job (dict, then YAML) on the server.

Task roles arrive as ``role-<n>-<field>`` (any set of ``n``, in order); parameters and secrets
as ``key: value`` lines; ports as ``label:count`` words. Whatever is entered is kept, even when
it is wrong: the protocol, not this module, says what is wrong and where.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from django.http import QueryDict

from protocol import dump_yaml

PLUGINS = "com.microsoft.pai.runtimeplugin"
ROLE_FIELD = re.compile(r"^role-(\d+)-([a-z_]+)$")
ROLE_FIELDS = (
    "name",
    "instances",
    "cpu",
    "memory",
    "gpu",
    "gputype",
    "shm",
    "ports",
    "commands",
    "min_failed",
    "min_succeeded",
    "task_retry",
)
ROLE_DEFAULTS = {
    "name": "worker",
    "instances": "1",
    "cpu": "1",
    "memory": "1024",
    "gpu": "0",
    "shm": "64",
    "ports": "",
    "min_failed": "1",
    "min_succeeded": "-1",
    "task_retry": "0",
}


@dataclass
class RoleInput:
    n: int
    values: dict[str, str] = field(default_factory=dict)

    def get(self, key: str) -> str:
        return self.values.get(key, "").strip()


def number(text: str) -> int | str:
    """An integer when the text is one (the protocol checks ranges), else the text itself."""
    text = text.strip()
    # Up to 18 digits; longer stays text (too long for int(), and the protocol says why).
    return int(text) if re.fullmatch(r"-?\d{1,18}", text) else text


def pairs(text: str) -> dict[str, Any]:
    """``key: value`` (or ``key=value``) lines; numbers stay strings, as typed."""
    out: dict[str, Any] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition(":") if ":" in line else line.partition("=")
        out[key.strip()] = value.strip() if sep else ""
    return out


def ports(text: str) -> dict[str, int | str]:
    out: dict[str, int | str] = {}
    for word in re.split(r"[\s,]+", text.strip()):
        if word:
            label, _, count = word.partition(":")
            out[label] = number(count or "1")
    return out


def lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines() if line.strip()]


def roles_of(data: QueryDict) -> list[RoleInput]:
    found: dict[int, RoleInput] = {}
    for key in data:
        match = ROLE_FIELD.match(key)
        if match and match.group(2) in ROLE_FIELDS:
            n = int(match.group(1))
            found.setdefault(n, RoleInput(n)).values[match.group(2)] = data.get(key, "")
    return [found[n] for n in sorted(found)]


def role_spec(role: RoleInput, image: bool) -> dict[str, Any]:
    # As OpenPAI's own form writes them: a blank "min failed" is 1 (the first failure fails the
    # job), a blank "min succeeded" is -1 (the job goes on until every task has ended), never
    # the protocol's default of the role's instance count, which lets the first role to
    # finish end the job and stop the others.
    completion: dict[str, Any] = {
        "minFailedInstances": number(role.get("min_failed") or "1"),
        "minSucceededInstances": number(role.get("min_succeeded") or "-1"),
    }
    spec: dict[str, Any] = {
        "instances": number(role.get("instances") or "1"),
        "completion": completion,
        "taskRetryCount": number(role.get("task_retry") or "0"),
    }
    if image:
        spec["dockerImage"] = "image"
    spec["resourcePerInstance"] = {
        "cpu": number(role.get("cpu") or "1"),
        "memoryMB": number(role.get("memory") or "1024"),
        "gpu": number(role.get("gpu") or "0"),
    }
    if role.get("ports"):
        spec["resourcePerInstance"]["ports"] = ports(role.get("ports"))
    if role.get("shm"):
        spec["extraContainerOptions"] = {"shmMB": number(role.get("shm"))}
    spec["commands"] = lines(role.values.get("commands", ""))
    return spec


def build_job(data: QueryDict) -> dict[str, Any]:
    """The v2 job the form describes (not checked: ``lifecycle.submit`` checks it)."""
    image = data.get("image", "").strip()
    job: dict[str, Any] = {"protocolVersion": 2, "name": data.get("name", "").strip()}
    job["type"] = "job"
    if image:
        job["prerequisites"] = [{"name": "image", "type": "dockerimage", "uri": image}]
    if data.get("parameters", "").strip():
        job["parameters"] = pairs(data["parameters"])
    if data.get("secrets", "").strip():
        job["secrets"] = pairs(data["secrets"])
    if data.get("job_retry", "").strip():
        job["jobRetryCount"] = number(data["job_retry"])
    roles = roles_of(data)
    job["taskRoles"] = {
        r.get("name") or f"taskrole_{r.n}": role_spec(r, bool(image)) for r in roles
    }
    deployment = deployment_of(data, list(job["taskRoles"]))
    if deployment:
        job["deployments"] = [deployment]
        job["defaults"] = {"deployment": deployment["name"]}
    gpu_types = {
        r.get("name") or f"taskrole_{r.n}": {"gpuType": r.get("gputype")}
        for r in roles
        if r.get("gputype")
    }
    vc = data.get("virtual_cluster", "").strip()
    if vc:
        job.setdefault("defaults", {})["virtualCluster"] = vc
    extras: dict[str, Any] = {}
    if gpu_types:
        extras["hivedscheduler"] = {"taskRoles": gpu_types}
    if data.get("ssh"):
        extras[PLUGINS] = [{"plugin": "ssh", "parameters": {"jobssh": True}}]
    if extras:
        job["extras"] = extras
    return job


def deployment_of(data: QueryDict, roles: list[str]) -> dict[str, Any] | None:
    pre, post = lines(data.get("pre_commands", "")), lines(data.get("post_commands", ""))
    if not (pre or post):
        return None
    steps: dict[str, Any] = {}
    if pre:
        steps["preCommands"] = pre
    if post:
        steps["postCommands"] = post
    name = data.get("deployment_name", "").strip() or "default"
    return {"name": name, "taskRoles": {role: dict(steps) for role in roles}}


def build_yaml(data: QueryDict) -> str:
    return dump_yaml(build_job(data))


def blank_roles() -> list[dict[str, str]]:
    """The one role a new form starts with."""
    return [dict(ROLE_DEFAULTS, n="0", commands="")]


def roles_for_template(data: QueryDict) -> list[dict[str, str]]:
    """The roles as entered, to show the form again after an error."""
    roles = roles_of(data)
    if not roles:
        return blank_roles()
    return [dict({"n": str(r.n)}, **{k: r.values.get(k, "") for k in ROLE_FIELDS}) for r in roles]
