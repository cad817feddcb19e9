"""v1 JSON jobs (seeds 002 and 003) turned into the canonical v2 form.

Mapping (v1 -> canonical v2):

* ``jobName`` -> ``name``; ``retryCount`` -> ``jobRetryCount``;
  ``virtualCluster`` -> ``defaults.virtualCluster``; ``extras`` -> ``extras``.
* ``image`` -> a prerequisite ``{"name": "image", "type": "dockerimage", "uri": image}``,
  and every task role's ``dockerImage`` is ``"image"``.
* each ``taskRoles[i]`` -> ``taskRoles[name]``: ``taskNumber`` -> ``instances``,
  ``cpuNumber`` -> ``cpu``, ``memoryMB`` -> ``memoryMB``, ``gpuNumber`` -> ``gpu``,
  ``portList`` -> ``ports`` ``{label: portNumber}``, ``command`` -> ``commands: [command]``,
  ``shmMB`` -> ``extraContainerOptions.shmMB`` (default 64, at most memoryMB). Omitted numbers
  take OpenPAI v1's defaults: taskNumber 1, cpuNumber 1, memoryMB 100, gpuNumber 0, a port's
  beginAt 0 and portNumber 1; ``null`` for one is refused.
* ``retryCount`` -1 and -2 (see ``_UNLIMITED_RETRIES``) -> ``jobRetryCount`` ``MAX_COUNT``.
* ``minFailedTaskCount`` / ``minSucceededTaskCount`` -> ``completion``: absent means the v2
  default (1 / instances); an explicit ``null`` means what seed 002 documents for v1 ("the
  job will always succeed regardless any task failure" / "only succeed until all tasks are
  completed"), which is v2's ``-1`` (``NULL_COMPLETION``).
* ``extras["v1"]`` keeps every v1-only field so nothing is lost: ``jobName``, and when given
  ``authFile``, ``dataDir``, ``outputDir``, ``codeDir``, ``gpuType``,
  ``killAllOnCompletedTaskNumber``, ``jobEnvs`` (with ``isDebug``); ``beginAt`` as
  ``{role: {label: beginAt}}`` for roles with ports; and under ``ignored`` every key v1 does
  not know, by its path (``{"tmp": {...}, "taskRoles[0].storageGB": 5}``), each with a warning.

Role names, port labels and the job name keep v1's patterns (the v2 check accepts them for a
job whose ``extras.v1`` is an object).
"""

from __future__ import annotations

import re
from typing import Any

from protocol.checks import (
    MAX_COUNT,
    given,
    is_int,
    want_bool,
    want_dict,
    want_int,
    want_list,
    want_match,
    want_str,
    whole,
)
from protocol.errors import Issues, join, show

NULL_COMPLETION = -1
# OpenPAI v1's retryCount is FrameworkController's maxRetryCount: -1 retries every failure
# without limit; -2 starts a new attempt after every end, a success too. Both are kept under
# extras.v1.retryCount and run as unlimited retries of failures (jobRetryCount MAX_COUNT).
_UNLIMITED_RETRIES = {
    -1: f"retryCount: -1 (retry every failure without limit) runs with jobRetryCount {MAX_COUNT}",
    -2: "retryCount: -2 (OpenPAI also restarts a job that succeeded) runs as -1 here: failures "
    f"are retried without limit (jobRetryCount {MAX_COUNT}), a success ends the job",
}
JOB_NAME = re.compile(r"^[A-Za-z0-9\-._~]+$")
ROLE_NAME = re.compile(r"^[A-Za-z0-9._~]+$")
TOP_KEYS = (
    "jobName", "image", "authFile", "dataDir", "outputDir", "codeDir", "virtualCluster",
    "taskRoles", "gpuType", "killAllOnCompletedTaskNumber", "retryCount", "jobEnvs", "extras",
)  # fmt: skip
ROLE_KEYS = (
    "name", "taskNumber", "cpuNumber", "memoryMB", "shmMB", "gpuNumber", "portList", "command",
    "minFailedTaskCount", "minSucceededTaskCount",
)  # fmt: skip
KEPT = ("authFile", "dataDir", "outputDir", "codeDir", "gpuType")


def looks_like_v1(doc: dict[str, Any]) -> bool:
    """v1 has ``jobName`` and a list of task roles; v2 has ``protocolVersion`` and a mapping."""
    if "protocolVersion" in doc:
        return False
    return "jobName" in doc or isinstance(doc.get("taskRoles"), list)


def convert_v1(issues: Issues, doc: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
    """The v2 document of a v1 job (to be checked by the v2 validator); issues for v1 rules."""
    v1: dict[str, Any] = {}
    ignored: dict[str, Any] = {}
    for key, value in doc.items():
        if key not in TOP_KEYS:
            ignored[key] = value
    name = (
        want_match(issues, "jobName", doc["jobName"], JOB_NAME) if given(doc, "jobName") else None
    )
    if not given(doc, "jobName"):
        issues.add("jobName", "is required")
    v1["jobName"] = name
    image = want_str(issues, "image", doc["image"], non_empty=True) if given(doc, "image") else None
    if not given(doc, "image"):
        issues.add("image", "is required")
    for key in KEPT:
        if key in doc:
            v1[key] = doc[key] if doc[key] is None else want_str(issues, key, doc[key])
    if given(doc, "killAllOnCompletedTaskNumber"):
        v1["killAllOnCompletedTaskNumber"] = want_int(
            issues, "killAllOnCompletedTaskNumber", doc["killAllOnCompletedTaskNumber"], 0
        )
    if given(doc, "jobEnvs"):
        envs = want_dict(issues, "jobEnvs", doc["jobEnvs"])
        if envs is not None and envs.get("isDebug") is not None:
            want_bool(issues, "jobEnvs.isDebug", envs["isDebug"])
        v1["jobEnvs"] = envs
    extras = want_dict(issues, "extras", doc["extras"]) if given(doc, "extras") else {}
    extras = dict(extras or {})
    if "v1" in extras:
        issues.add("extras.v1", "is reserved for the fields of a job converted from v1")
    retries = _retries(issues, doc.get("retryCount"))
    if retries in _UNLIMITED_RETRIES:
        v1["retryCount"] = retries
        warnings.append(_UNLIMITED_RETRIES[retries])
        retries = MAX_COUNT
    roles, begin_at = _roles(issues, doc, ignored)
    if begin_at:
        v1["beginAt"] = begin_at
    if ignored:
        v1["ignored"] = ignored
        for path in ignored:
            warnings.append(f"{path}: not a field of the v1 job format; kept in extras.v1.ignored")
    extras["v1"] = v1
    result: dict[str, Any] = {
        "protocolVersion": 2,
        "name": name,
        "type": "job",
        "prerequisites": [{"name": "image", "type": "dockerimage", "uri": image or "image"}],
        "jobRetryCount": retries,
        "taskRoles": roles,
        "extras": extras,
    }
    result = {key: value for key, value in result.items() if value is not None}
    if given(doc, "virtualCluster"):
        cluster = want_str(issues, "virtualCluster", doc["virtualCluster"], non_empty=True)
        result["defaults"] = {"virtualCluster": cluster}
    return result


def _retries(issues: Issues, value: object) -> int | None:
    """v1's retryCount: -2, -1 or an integer >= 0 (None when absent or wrong)."""
    if value is None:
        return None
    number = whole(value)
    if is_int(number) and isinstance(number, int) and number < 0:
        if number in _UNLIMITED_RETRIES:
            return number
        issues.add("retryCount", f"must be -2, -1 or an integer >= 0, got {show(value)}")
        return None
    return want_int(issues, "retryCount", value, 0)


def _roles(
    issues: Issues, doc: dict[str, Any], ignored: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, dict[str, int]]]:
    roles: dict[str, Any] = {}
    begin_at: dict[str, dict[str, int]] = {}
    if not given(doc, "taskRoles"):
        issues.add("taskRoles", "is required")
        return roles, begin_at
    items = want_list(issues, "taskRoles", doc["taskRoles"]) or []
    if isinstance(doc["taskRoles"], list) and not items:
        issues.add("taskRoles", "must have at least one task role")
    for index, item in enumerate(items):
        path = join("taskRoles", index)
        spec = want_dict(issues, path, item)
        if spec is None:
            continue
        for key, value in spec.items():
            if key not in ROLE_KEYS:
                ignored[join(path, key)] = value
        name = _required(issues, path, spec, "name", ROLE_NAME)
        if name is not None and name in roles:
            issues.add(join(path, "name"), f"duplicate task role name {show(name)}")
            continue
        role, ports_begin = _role(issues, path, spec, ignored)
        if name is not None:
            roles[name] = role
            if ports_begin:
                begin_at[name] = ports_begin
    return roles, begin_at


def _required(
    issues: Issues, path: str, spec: dict[str, Any], key: str, pattern: re.Pattern[str]
) -> str | None:
    if not given(spec, key):
        issues.add(join(path, key), "is required")
        return None
    return want_match(issues, join(path, key), spec[key], pattern)


def _int(
    issues: Issues, path: str, spec: dict[str, Any], key: str, minimum: int, default: int
) -> int:
    """An integer field OpenPAI's v1 checker fills with ``default`` when it is absent."""
    if key not in spec:
        return default
    value = want_int(issues, join(path, key), spec[key], minimum)
    return default if value is None else value


def _role(
    issues: Issues, path: str, spec: dict[str, Any], ignored: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, int]]:
    instances = _int(issues, path, spec, "taskNumber", 1, 1)
    ports: dict[str, int] = {}
    resources: dict[str, Any] = {
        "cpu": _int(issues, path, spec, "cpuNumber", 1, 1),
        "memoryMB": _int(issues, path, spec, "memoryMB", 100, 100),
        "gpu": _int(issues, path, spec, "gpuNumber", 0, 0),
        "ports": ports,
    }
    shm = 64
    if given(spec, "shmMB"):
        shm = want_int(issues, join(path, "shmMB"), spec["shmMB"], 1) or 64
        if (
            whole(spec["shmMB"]) == shm
            and whole(spec.get("memoryMB")) == resources["memoryMB"]
            and shm > resources["memoryMB"]
        ):  # OpenPAI's v1 checker: shmMB at most memoryMB
            issues.add(
                join(path, "shmMB"),
                f"must not be more than memoryMB ({resources['memoryMB']}), got {shm}",
            )
    completion: dict[str, int] = {}
    for v1_key, v2_key in (
        ("minFailedTaskCount", "minFailedInstances"),
        ("minSucceededTaskCount", "minSucceededInstances"),
    ):
        if v1_key not in spec:
            continue
        if spec[v1_key] is None:
            completion[v2_key] = NULL_COMPLETION
            continue
        count = want_int(issues, join(path, v1_key), spec[v1_key], 1)
        if count is not None and count > instances:
            issues.add(
                join(path, v1_key), f"must not be more than taskNumber ({instances}), got {count}"
            )
        elif count is not None:
            completion[v2_key] = count
    command = None
    if given(spec, "command"):
        command = want_str(issues, join(path, "command"), spec["command"], non_empty=True)
    else:
        issues.add(join(path, "command"), "is required")
    begin_at = _ports(issues, join(path, "portList"), spec.get("portList"), ports, ignored)
    role = {
        "instances": instances,
        "completion": completion,
        "dockerImage": "image",
        "extraContainerOptions": {"shmMB": shm},
        "resourcePerInstance": resources,
        "commands": [command or ":"],
    }
    return role, begin_at


def _ports(
    issues: Issues, path: str, value: object, ports: dict[str, int], ignored: dict[str, Any]
) -> dict[str, int]:
    begin_at: dict[str, int] = {}
    if value is None:
        return begin_at
    for index, item in enumerate(want_list(issues, path, value) or []):
        where = join(path, index)
        port = want_dict(issues, where, item)
        if port is None:
            continue
        for key, extra in port.items():
            if key not in ("label", "beginAt", "portNumber"):
                ignored[join(where, key)] = extra
        label = _required(issues, where, port, "label", ROLE_NAME)
        begin = _int(issues, where, port, "beginAt", 0, 0)
        number = _int(issues, where, port, "portNumber", 1, 1)
        if label is None:
            continue
        if label in ports:
            issues.add(join(where, "label"), f"duplicate port label {show(label)}")
            continue
        ports[label] = number
        begin_at[label] = begin
    return begin_at
