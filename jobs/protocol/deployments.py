"""Deployments (per-role pre/post commands) and defaults of a v2 job."""

from __future__ import annotations

from typing import Any

from jobs.protocol.checks import (
    given,
    unknown_keys,
    want_dict,
    want_list,
    want_str,
    want_strings,
    without_nulls,
)
from jobs.protocol.errors import Issues, Where, show
from jobs.protocol.prereqs import version_text


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
        spec = without_nulls(issues, path, spec, ("name", "version", "taskRoles"), ("name",))
        out = dict(spec)
        name = (
            want_str(issues, (path, "name"), spec["name"], non_empty=True)
            if given(spec, "name")
            else None
        )
        if not given(spec, "name"):
            issues.add((path, "name"), "is required")
        elif name is not None and name in seen:
            issues.add((path, "name"), f"duplicate deployment name {show(name)}")
        seen.add(name or "")
        if given(spec, "version"):
            out["version"] = version_text(issues, (path, "version"), spec["version"], sources)
        out["taskRoles"] = _deployment_roles(
            issues, (path, "taskRoles"), spec.get("taskRoles"), roles
        )
        result.append(out)
    return result


def _deployment_roles(
    issues: Issues, path: Where, value: object, roles: set[str] | None
) -> dict[str, Any]:
    entries = object_or_empty(issues, path, value)
    result: dict[str, Any] = {}
    for name, entry in entries.items():
        where = (path, name)
        if roles is not None and name not in roles:
            issues.add(where, f"no task role named {show(name)}")
        spec = object_or_empty(issues, where, entry)
        unknown_keys(issues, where, spec, ("preCommands", "postCommands"))
        spec = without_nulls(issues, where, spec, ("preCommands", "postCommands"))
        result[name] = {}
        for key in ("preCommands", "postCommands"):
            if given(spec, key):
                result[name][key] = want_strings(issues, (where, key), spec[key]) or []
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
