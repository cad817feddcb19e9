"""Deployments (per-role pre/post commands) and defaults of a v2 job.

OpenPAI's checker (microsoft/pai ``src/rest-server/src/config/v2/protocol.js``) requires a
deployment's ``name`` (in the pattern of a job's name) and ``taskRoles`` (at least one, each an
object whose ``preCommands`` / ``postCommands`` are non-empty lists, as the published schema,
microsoft/openpai-protocol ``schemas/v2/schema.yaml``, says too). A deployment's ``version`` is
no field of either: it is kept as given (a number becomes the string written, as elsewhere).
"""

from __future__ import annotations

from typing import Any

from protocol.checks import (
    given,
    unknown_keys,
    want_dict,
    want_list,
    want_match,
    want_str,
    want_strings,
    without_nulls,
)
from protocol.errors import Issues, Where, show
from protocol.prereqs import NAME, version_text


def object_or_empty(issues: Issues, path: Where, value: object) -> dict[str, Any]:
    if value is None:
        return {}
    return want_dict(issues, path, value) or {}


def check_deployments(
    issues: Issues, value: object, roles: set[str] | None, sources: dict[str, str]
) -> list[dict[str, Any]]:
    if value is None:
        return []
    result: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, item in enumerate(want_list(issues, "deployments", value) or []):
        path = ("deployments", index)
        spec = want_dict(issues, path, item)
        if spec is None:
            continue
        spec = without_nulls(issues, path, spec, ("name", "taskRoles"), ("name", "taskRoles"))
        out = dict(spec)
        name = (
            want_match(issues, (path, "name"), spec["name"], NAME) if given(spec, "name") else None
        )
        if not given(spec, "name"):
            issues.add((path, "name"), "is required")
        elif name is not None and name in seen:
            issues.add((path, "name"), f"duplicate deployment name {show(name)}")
        seen.add(name or "")
        version = spec.get("version")
        if isinstance(version, str | int | float) and not isinstance(version, bool):
            out["version"] = version_text(issues, (path, "version"), version, sources)
        if not given(spec, "taskRoles"):
            issues.add((path, "taskRoles"), "is required")
        out["taskRoles"] = _deployment_roles(
            issues, (path, "taskRoles"), spec.get("taskRoles"), roles
        )
        result.append(out)
    return result


def _deployment_roles(
    issues: Issues, path: Where, value: object, roles: set[str] | None
) -> dict[str, Any]:
    if value is None:
        return {}
    entries = want_dict(issues, path, value)
    if entries is None:
        return {}
    if not entries:
        issues.add(path, "must name at least one task role")
    result: dict[str, Any] = {}
    for name, entry in entries.items():
        where = (path, name)
        if roles is not None and name not in roles:
            issues.add(where, f"no task role named {show(name)}")
        spec = want_dict(issues, where, entry) or {}
        unknown_keys(issues, where, spec, ("preCommands", "postCommands"))
        spec = without_nulls(issues, where, spec, ("preCommands", "postCommands"))
        result[name] = {}
        for key in ("preCommands", "postCommands"):
            if given(spec, key):
                commands = want_strings(issues, (where, key), spec[key], non_empty=True)
                result[name][key] = commands or []
    return result


def check_defaults(
    issues: Issues, value: object, deployments: list[dict[str, Any]]
) -> dict[str, Any]:
    defaults = object_or_empty(issues, "defaults", value)
    # other keys are kept as given: OpenPAI's schema allows them
    defaults = without_nulls(issues, "defaults", defaults, ("virtualCluster", "deployment"))
    result: dict[str, Any] = {
        key: val for key, val in defaults.items() if key not in ("virtualCluster", "deployment")
    }
    if given(defaults, "virtualCluster"):
        result["virtualCluster"] = want_str(
            issues, "defaults.virtualCluster", defaults["virtualCluster"], non_empty=True
        )
    if given(defaults, "deployment"):
        name = want_str(issues, "defaults.deployment", defaults["deployment"])
        if name is not None and name not in [d.get("name") for d in deployments]:
            issues.add("defaults.deployment", f"no deployment named {show(name)}")
        result["deployment"] = name
    return result
