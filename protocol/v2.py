"""Check a v2 job (seed 000, with seed 001's prerequisites) and build its canonical form.

A null value (YAML's ``key:`` with nothing after it) is refused, naming the field, as OpenPAI's
schema refuses it; only a completion count may be null (OpenPAI's checker allows it), which
means its default.
A job converted from v1 (``extras.v1`` is an object) may keep v1's names for the job, its
task roles and its port labels, which v1 allows to hold ``.`` and ``~``.
"""

from __future__ import annotations

import re
from typing import Any

from protocol import references
from protocol.checks import (
    C_IDENTIFIER,
    given,
    unknown_keys,
    want_bool,
    want_dict,
    want_int,
    want_match,
    want_str,
    want_strings,
    whole,
    without_nulls,
)
from protocol.deployments import check_defaults, check_deployments, object_or_empty
from protocol.errors import Issues, Where, show
from protocol.notify_extras import check_notify
from protocol.prereqs import (
    MAX_NAME,
    NAME,
    TYPES,
    check_prerequisites,
    is_version_two,
    version_text,
)

V1_NAME = re.compile(r"^[A-Za-z0-9\-._~]+$")
V1_ROLE = re.compile(r"^[A-Za-z0-9._~]+$")
TOP_KEYS = (
    "protocolVersion", "name", "type", "version", "contributor", "description", "prerequisites",
    "parameters", "secrets", "jobRetryCount", "taskRoles", "deployments", "defaults", "extras",
)  # fmt: skip
ROLE_KEYS = (
    "protocolVersion", "instances", "completion", "taskRetryCount", "dockerImage", "data",
    "output", "script", "extraContainerOptions", "resourcePerInstance", "commands",
    "prerequisites",
)  # fmt: skip
REQUIRED_TOP_KEYS = ("protocolVersion", "name", "type", "taskRoles")
REQUIRED_ROLE_KEYS = ("dockerImage", "resourcePerInstance", "commands")
RESOURCE_KEYS = ("cpu", "memoryMB", "gpu", "ports")
DEFAULT_SHM_MB = 64


def check_v2(issues: Issues, doc: dict[str, Any], sources: dict[str, str]) -> dict[str, Any]:
    """The canonical job; issues for everything wrong (the result is unusable if any)."""
    from_v1 = isinstance(doc.get("extras"), dict) and isinstance(doc["extras"].get("v1"), dict)
    unknown_keys(issues, "", doc, TOP_KEYS)
    doc = without_nulls(issues, "", doc, TOP_KEYS, REQUIRED_TOP_KEYS)
    job: dict[str, Any] = {"protocolVersion": 2}
    if not given(doc, "protocolVersion"):
        issues.add("protocolVersion", "is required")
    elif not is_version_two(doc["protocolVersion"]):
        issues.add("protocolVersion", f"must be 2, got {show(doc['protocolVersion'])}")
    job["name"] = _name(issues, doc.get("name"), V1_NAME if from_v1 else NAME)
    if not given(doc, "type"):
        issues.add("type", "is required")
    elif doc["type"] != "job":
        issues.add("type", f'must be "job", got {show(doc["type"])}')
    job["type"] = "job"
    if given(doc, "version"):
        job["version"] = version_text(issues, "version", doc["version"], sources)
    for key in ("contributor", "description"):
        if given(doc, key):
            job[key] = want_str(issues, key, doc[key])
    prereqs = check_prerequisites(issues, doc.get("prerequisites"), sources)
    job["prerequisites"] = prereqs
    unchecked: set[str] = set()
    for key in ("parameters", "secrets"):
        job[key] = object_or_empty(issues, key, doc.get(key))
        if doc.get(key) is not None and not isinstance(doc[key], dict):
            unchecked.add("$" + key)
    job["jobRetryCount"] = _count(issues, "jobRetryCount", doc.get("jobRetryCount"), 0, 0)
    kinds: dict[str, Any] = {}
    for prereq in prereqs:  # the first of duplicates counts; "" marks a prerequisite unnamed
        name = prereq.get("name")
        kinds.setdefault(name if isinstance(name, str) and name.strip() else "", prereq.get("type"))
    job["taskRoles"] = _roles(issues, doc.get("taskRoles"), kinds, from_v1)
    given_roles = doc.get("taskRoles")
    known_roles = set(given_roles) if isinstance(given_roles, dict) and given_roles else None
    job["deployments"] = check_deployments(issues, doc.get("deployments"), known_roles, sources)
    job["defaults"] = check_defaults(issues, doc.get("defaults"), job["deployments"])
    job["extras"] = object_or_empty(issues, "extras", doc.get("extras"))
    check_notify(issues, job["extras"])
    references.check_job(issues, job, frozenset(unchecked))
    return job


def _name(issues: Issues, value: object, pattern: re.Pattern[str]) -> str:
    if value is None:
        issues.add("name", "is required")
        return ""
    name = want_match(issues, "name", value, pattern)
    if name is not None and len(name) > MAX_NAME:
        issues.add("name", f"must be at most {MAX_NAME} characters long")
    return name or ""


def _count(issues: Issues, path: Where, value: object, minimum: int, default: int) -> int:
    if value is None:
        return default
    result = want_int(issues, path, value, minimum)
    return default if result is None else result


def _roles(
    issues: Issues, value: object, kinds: dict[str, Any], from_v1: bool
) -> dict[str, dict[str, Any]]:
    if value is None:
        issues.add("taskRoles", "is required")
        return {}
    roles = want_dict(issues, "taskRoles", value)
    if roles is None:
        return {}
    if not roles:
        issues.add("taskRoles", "must have at least one task role")
    result: dict[str, dict[str, Any]] = {}
    for name, spec in roles.items():
        path = ("taskRoles", name)
        pattern = V1_ROLE if from_v1 else C_IDENTIFIER
        if not pattern.match(name):
            issues.add(path, f"a task role name must match {pattern.pattern}")
        role = want_dict(issues, path, spec)
        if role is not None:
            result[name] = _role(issues, path, role, kinds, V1_ROLE if from_v1 else C_IDENTIFIER)
    return result


def _role(
    issues: Issues, path: Where, spec: dict[str, Any], kinds: dict[str, Any], label: re.Pattern[str]
) -> dict[str, Any]:
    unknown_keys(issues, path, spec, ROLE_KEYS)
    spec = without_nulls(issues, path, spec, ROLE_KEYS, REQUIRED_ROLE_KEYS)
    if given(spec, "protocolVersion") and not is_version_two(spec["protocolVersion"]):
        issues.add((path, "protocolVersion"), f"must be 2, got {show(spec['protocolVersion'])}")
    instances = _count(issues, (path, "instances"), spec.get("instances"), 1, 1)
    role: dict[str, Any] = {"instances": instances}
    role["completion"] = _completion(issues, (path, "completion"), spec, instances)
    role["taskRetryCount"] = _count(
        issues, (path, "taskRetryCount"), spec.get("taskRetryCount"), 0, 0
    )
    listed: list[str] = []
    if given(spec, "prerequisites"):
        listed = want_strings(issues, (path, "prerequisites"), spec["prerequisites"]) or []
        for index, name in enumerate(listed):
            if _unknown(name, kinds):
                issues.add(((path, "prerequisites"), index), f"no prerequisite named {show(name)}")
    image = spec.get("dockerImage")
    if image is None:
        images = [name for name in listed if kinds.get(name) == "dockerimage"]
        image = images[0] if len(images) == 1 else None
        if image is None:
            issues.add((path, "dockerImage"), "is required")
    role["dockerImage"] = _selection(issues, (path, "dockerImage"), image, "dockerimage", kinds)
    for key in ("data", "output", "script"):
        if given(spec, key):
            role[key] = _selection(issues, (path, key), spec[key], key, kinds)
    options = object_or_empty(
        issues, (path, "extraContainerOptions"), spec.get("extraContainerOptions")
    )
    unknown_keys(issues, (path, "extraContainerOptions"), options, ("shmMB", "infiniband"))
    options = without_nulls(
        issues, (path, "extraContainerOptions"), options, ("shmMB", "infiniband")
    )
    options_path = (path, "extraContainerOptions")
    shm = _count(issues, (options_path, "shmMB"), options.get("shmMB"), 1, DEFAULT_SHM_MB)
    infiniband = _flag(issues, (options_path, "infiniband"), options.get("infiniband"))
    role["extraContainerOptions"] = {"shmMB": shm, "infiniband": infiniband}
    role["resourcePerInstance"] = _resources(issues, (path, "resourcePerInstance"), spec, label)
    memory = role["resourcePerInstance"]["memoryMB"]
    resources = spec.get("resourcePerInstance")
    given_memory = whole(resources.get("memoryMB")) if isinstance(resources, dict) else None
    valid = whole(options.get("shmMB")) == shm and given_memory == memory  # no default stood in
    if valid and shm > memory:  # OpenPAI: /dev/shm is part of the memory
        issues.add((options_path, "shmMB"), f"must not be more than memoryMB ({memory}), got {shm}")
    commands = None
    if not given(spec, "commands"):
        issues.add((path, "commands"), "is required")
    else:
        commands = want_strings(issues, (path, "commands"), spec["commands"], non_empty=True)
    role["commands"] = commands or []
    if given(spec, "prerequisites"):
        role["prerequisites"] = listed
    return role


def _unknown(name: str, kinds: dict[str, Any]) -> bool:
    """No prerequisite has this name (unsure, and so False, when one has no valid name)."""
    return name not in kinds and "" not in kinds


def _flag(issues: Issues, path: Where, value: object) -> bool:
    return False if value is None else bool(want_bool(issues, path, value))


def _completion(
    issues: Issues, path: Where, spec: dict[str, Any], instances: int
) -> dict[str, int]:
    completion = object_or_empty(issues, path, spec.get("completion"))
    unknown_keys(issues, path, completion, ("minFailedInstances", "minSucceededInstances"))
    result = {"minFailedInstances": 1, "minSucceededInstances": instances}
    for key in result:
        value = completion.get(key)
        if value is None:
            continue
        count = want_int(issues, (path, key), value, 1, minus_one=True)
        if count is None:
            continue
        if count > instances:
            issues.add((path, key), f"must not be more than instances ({instances}), got {count}")
        result[key] = count
    return result


def _selection(
    issues: Issues, path: Where, value: object, kind: str, kinds: dict[str, Any]
) -> str | None:
    name = want_str(issues, path, value) if value is not None else None
    if name is None:
        return None
    if _unknown(name, kinds):
        issues.add(path, f"no prerequisite named {show(name)}")
    elif kinds.get(name) in TYPES and kinds[name] != kind:
        issues.add(path, f"{show(name)} is a {kinds[name]} prerequisite, not a {kind} one")
    return name


def _resources(
    issues: Issues, path: Where, spec: dict[str, Any], label: re.Pattern[str]
) -> dict[str, Any]:
    if not given(spec, "resourcePerInstance"):
        issues.add(path, "is required")
        return {"cpu": 1, "memoryMB": 1, "gpu": 0, "ports": {}}
    given_resources = want_dict(issues, path, spec["resourcePerInstance"]) or {}
    unknown_keys(issues, path, given_resources, RESOURCE_KEYS)
    given_resources = without_nulls(issues, path, given_resources, RESOURCE_KEYS, RESOURCE_KEYS[:3])
    result: dict[str, Any] = {}
    for key, minimum in (("cpu", 1), ("memoryMB", 1), ("gpu", 0)):
        if not given(given_resources, key):
            issues.add((path, key), "is required")
        result[key] = _count(issues, (path, key), given_resources.get(key), minimum, minimum)
    ports = object_or_empty(issues, (path, "ports"), given_resources.get("ports"))
    result["ports"] = {}
    for name, count in ports.items():
        if not label.match(name):
            issues.add(((path, "ports"), name), f"a port label must match {label.pattern}")
        result["ports"][name] = _count(issues, ((path, "ports"), name), count, 1, 1)
        if count is None:
            issues.add(((path, "ports"), name), "must be an integer >= 1, got null")
    return result
