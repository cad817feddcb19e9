"""The builder in reverse (switching text -> form): a canonical job, from ``load_job``, as the
form's fields, and what of the job the form cannot show.

Nothing is silently lost: besides the named limits below, the filled form is built back into
a job (``build_yaml``), loaded again, and compared with the original; any difference is one
more thing the form cannot show, and then the job stays in text.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.http import QueryDict

from jobs.forms.builder import PLUGINS, build_yaml
from protocol import ProtocolError, load_job
from protocol.references import as_text

SSH_PLUGIN = [{"plugin": "ssh", "parameters": {"jobssh": True}}]
ROLE_ONLY_IN_TEXT = ("data", "output", "script", "prerequisites")
MAX_DIFFERENCES = 5


@dataclass
class Filled:
    """``fields`` as the builder posts them; ``cannot``: reasons to stay in text mode."""

    fields: dict[str, str] = field(default_factory=dict)
    cannot: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def data(self) -> QueryDict:
        out = QueryDict(mutable=True)
        out.update(self.fields)
        return out


def fill_form(job: dict[str, Any], vc: str = "", deployment: str = "") -> Filled:
    """The form for ``job``; ``vc`` and ``deployment``: the text pane's choices, if any."""
    job = copy.deepcopy(job)
    if vc:
        job["defaults"]["virtualCluster"] = vc
    if deployment:
        job["defaults"]["deployment"] = deployment
    filled = Filled(cannot=limits(job))
    if filled.cannot:
        return filled
    filled.fields = fields_of(job)
    filled.cannot = differences(job, filled.data())
    if "v1" in job["extras"]:
        filled.notes.append(
            "This v1 job is shown as v2: submitted from the form, its tasks get the PAI_* "
            "variables but not v1's QIZHI_* aliases."
        )
    return filled


def limits(job: dict[str, Any]) -> list[str]:
    """What the form has no field for, said as a person would."""
    out: list[str] = []
    prereqs = job["prerequisites"]
    images = [p for p in prereqs if p.get("type") == "dockerimage"]
    others = [p for p in prereqs if p.get("type") != "dockerimage"]
    if others:
        names = ", ".join(f"{p.get('name')} ({p.get('type')})" for p in others)
        out.append(f"this job uses prerequisites callbacks the form cannot show: {names}")
    if len(images) > 1:
        names = ", ".join(str(p.get("name")) for p in images)
        out.append(f"this job names several images ({names}); the form has one image")
    for image in images:
        extra = sorted(set(image) - {"name", "type", "uri"})
        if extra:
            out.append(f"the image {image.get('name')} has {', '.join(extra)}: not in the form")
    for key in ("version", "contributor", "description"):
        if key in job:
            out.append(f"the form has no field for the job's {key}")
    for name, role in job["taskRoles"].items():
        used = [key for key in ROLE_ONLY_IN_TEXT if key in role]
        if used:
            out.append(f"task role {name} uses {', '.join(used)}: not in the form")
        if role["extraContainerOptions"].get("infiniband"):
            out.append(f"task role {name} asks for infiniband: not in the form")
    out += deployment_limits(job)
    out += extras_limits(job["extras"])
    return out


def deployment_limits(job: dict[str, Any]) -> list[str]:
    deployments = job["deployments"]
    if len(deployments) > 1:
        return ["this job has several deployments; the form has one"]
    if not deployments:
        return []
    deployment = deployments[0]
    name = deployment["name"]
    out = []
    if job["defaults"].get("deployment") != name:
        out.append(f"deployment {name} is not the job's default; the form would make it one")
    if set(deployment) - {"name", "taskRoles"}:
        out.append(f"deployment {name} has fields the form cannot show")
    steps = deployment["taskRoles"]
    if set(steps) != set(job["taskRoles"]) or len({repr(s) for s in steps.values()}) > 1:
        out.append(
            f"deployment {name} gives task roles different pre/post commands; "
            "the form gives every role the same"
        )
    return out


def extras_limits(extras: dict[str, Any]) -> list[str]:
    out = []
    for key, value in extras.items():
        if key == PLUGINS and value == SSH_PLUGIN:
            continue
        if key == "hivedscheduler" and gpu_types(value) is not None:
            continue
        if key == "v1" and set(value) <= {"jobName"}:
            continue
        if key == "v1":
            kept = ", ".join(sorted(set(value) - {"jobName"}))
            out.append(f"this v1 job uses {kept}, which the form (v2) cannot show")
        else:
            out.append(f"this job's extras.{key} is not in the form")
    return out


def gpu_types(value: Any) -> dict[str, str] | None:
    """``{role: gpuType}`` when hivedscheduler's settings are only that, else None."""
    if not isinstance(value, dict) or set(value) != {"taskRoles"}:
        return None
    roles = value["taskRoles"]
    if not isinstance(roles, dict):
        return None
    out = {}
    for role, spec in roles.items():
        if not isinstance(spec, dict) or set(spec) != {"gpuType"}:
            return None
        out[role] = as_text(spec["gpuType"])
    return out


def lines(items: list[str]) -> str:
    return "\n".join(items)


def pairs_text(values: dict[str, Any]) -> str:
    return "\n".join(f"{key}: {as_text(value)}" for key, value in values.items())


def fields_of(job: dict[str, Any]) -> dict[str, str]:
    images = [p for p in job["prerequisites"] if p.get("type") == "dockerimage"]
    extras = job["extras"]
    fields = {
        "name": job["name"],
        "virtual_cluster": job["defaults"].get("virtualCluster", ""),
        "image": as_text(images[0]["uri"]) if images else "",
        "job_retry": str(job["jobRetryCount"]),
        "parameters": pairs_text(job["parameters"]),
        "secrets": pairs_text(job["secrets"]),
    }
    if extras.get(PLUGINS) == SSH_PLUGIN:
        fields["ssh"] = "1"
    if job["deployments"]:
        deployment = job["deployments"][0]
        steps = next(iter(deployment["taskRoles"].values()), {})
        fields["deployment_name"] = deployment["name"]
        fields["pre_commands"] = lines(steps.get("preCommands", []))
        fields["post_commands"] = lines(steps.get("postCommands", []))
    types = gpu_types(extras.get("hivedscheduler")) or {}
    for n, (name, role) in enumerate(job["taskRoles"].items()):
        resources = role["resourcePerInstance"]
        completion = role["completion"]
        values = {
            "name": name,
            "instances": role["instances"],
            "cpu": resources["cpu"],
            "memory": resources["memoryMB"],
            "gpu": resources["gpu"],
            "gputype": types.get(name, ""),
            "shm": role["extraContainerOptions"]["shmMB"],
            "ports": " ".join(f"{label}:{count}" for label, count in resources["ports"].items()),
            "commands": lines(role["commands"]),
            "min_failed": completion["minFailedInstances"],
            "min_succeeded": completion["minSucceededInstances"],
            "task_retry": role["taskRetryCount"],
        }
        fields.update({f"role-{n}-{key}": as_text(value) for key, value in values.items()})
    return fields


def differences(job: dict[str, Any], data: QueryDict) -> list[str]:
    """What the form, built back into a job, would not keep of ``job``."""
    try:
        rebuilt = load_job(build_yaml(data), max_bytes=settings.JOB_MAX_BYTES).job
    except ProtocolError as exc:
        return [f"the form cannot hold this job: {issue}" for issue in exc.issues][:5]
    found: list[str] = []
    compare(comparable(job), comparable(rebuilt), "", found)
    return [f"the form cannot keep {path or 'the job'} as it is" for path in found]


def comparable(job: dict[str, Any]) -> dict[str, Any]:
    """The job as its tasks would see it: the image by its address, not its name, parameter
    and secret values as the text ``<% %>`` references render, and no v1 job name."""
    job = copy.deepcopy(job)
    uris = {p.get("name"): p.get("uri") for p in job["prerequisites"]}
    for prereq in job["prerequisites"]:
        prereq.pop("name", None)
    for role in job["taskRoles"].values():
        role["dockerImage"] = uris.get(role["dockerImage"], role["dockerImage"])
    for key in ("parameters", "secrets"):
        job[key] = {k: as_text(v) for k, v in job[key].items()}
    job["extras"].pop("v1", None)
    return job


def compare(old: Any, new: Any, path: str, found: list[str]) -> None:
    if len(found) >= MAX_DIFFERENCES or old == new:
        return
    if isinstance(old, dict) and isinstance(new, dict):
        for key in list(old) + [k for k in new if k not in old]:
            compare(old.get(key), new.get(key), f"{path}.{key}" if path else str(key), found)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for index, (a, b) in enumerate(zip(old, new, strict=True)):
            compare(a, b, f"{path}[{index}]", found)
    else:
        found.append(path)
