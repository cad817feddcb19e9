"""Prerequisites (seed 000) with seed 001's extensions: plugin, require, callbacks.

Each prerequisite is kept as given (plugin-specific keys included: a callback reads them as
``<% this.parameters.key %>``); only ``version`` is turned into a string. A null for one of
the known fields is refused, naming it (a plugin-specific key may be null).
"""

from __future__ import annotations

import re
from typing import Any

from protocol.checks import (
    given,
    is_int,
    unknown_keys,
    want_dict,
    want_list,
    want_match,
    want_one_of,
    want_str,
    want_strings,
    whole,
    without_nulls,
)
from protocol.errors import Issues, Where, show, spell

NAME = re.compile(r"^[a-zA-Z0-9_-]+$")  # as a job's name (OpenPAI's schema)
MAX_NAME = 255
TYPES = ("data", "script", "dockerimage", "output")
# Seed 001's events, and OpenPAI runtime's cmd-plugin events, which its checker accepts on a
# prerequisite too: ``taskStarts`` runs as ``containerStart`` does, ``taskSucceeds`` at exit
# as ``containerExit`` does but only when the task has succeeded so far.
START_EVENTS = ("containerStart", "taskStarts")
EXIT_EVENTS = ("containerExit", "taskSucceeds")
EVENTS = (*START_EVENTS, *EXIT_EVENTS)
POLICIES = ("ignore", "fail")
# OpenPAI runs a data, script or output prerequisite with this plugin only ("only support
# com.microsoft.pai.runtimeplugin.cmd for now": microsoft/pai
# docs/manual/cluster-user/how-to-use-advanced-job-settings.md, "Use Prerequisites"); a
# dockerimage is run by docker (seed 001: "default is ... docker (for dockerimage)").
CMD_PLUGIN = "com.microsoft.pai.runtimeplugin.cmd"
CALLBACK_KEYS = ("event", "commands", "failurePolicy")
AUTH_KEYS = ("username", "password", "registryuri")
KNOWN = (
    "protocolVersion", "name", "type", "version", "contributor", "description", "auth", "uri",
    "plugin", "require", "callbacks", "failurePolicy",
)  # fmt: skip
_KNOWN = frozenset(KNOWN)


def is_version_two(value: object) -> bool:
    """``protocolVersion`` may be written 2, 2.0 (a JavaScript number) or "2" (not true)."""
    return value == "2" or (is_int(whole(value)) and value == 2)


def version_text(issues: Issues, path: Where, value: object, sources: dict[str, str]) -> str | None:
    """``version`` as a string: YAML ``1.0`` is "1.0" (as written), ``3`` is "3"."""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (sources.get(spell(path)) if sources else None) or str(value)
    issues.add(path, f"must be a string, got {show(value)}")
    return None


def check_prerequisites(
    issues: Issues, value: object, sources: dict[str, str]
) -> list[dict[str, Any]]:
    if value is None:
        return []
    items = want_list(issues, "prerequisites", value)
    if items is None:
        return []
    result: list[dict[str, Any]] = []
    seen: dict[str, Where] = {}
    for index, item in enumerate(items):
        path = ("prerequisites", index)
        spec = want_dict(issues, path, item)
        if spec is None:
            continue
        out = _check_one(issues, path, spec, sources)
        name = out.get("name")
        if isinstance(name, str):
            if name in seen:
                issues.add(
                    (path, "name"), f"duplicate prerequisite name (also {spell(seen[name])})"
                )
            else:
                seen[name] = path
        result.append(out)
    _check_requires(issues, result)
    return result


def _check_one(
    issues: Issues, path: Where, spec: dict[str, Any], sources: dict[str, str]
) -> dict[str, Any]:
    required = ("name", "type", "uri") if spec.get("type") == "dockerimage" else ("name", "type")
    spec = without_nulls(issues, path, spec, KNOWN, required)
    out = dict(spec)
    if given(spec, "name"):
        name = want_match(issues, (path, "name"), spec["name"], NAME)
        if name is not None and len(name) > MAX_NAME:
            issues.add((path, "name"), f"must be at most {MAX_NAME} characters long")
    else:
        issues.add((path, "name"), "is required")
    kind: str | None = None
    if given(spec, "type"):
        kind = want_one_of(issues, (path, "type"), spec["type"], TYPES)
    else:
        issues.add((path, "type"), "is required")
    if given(spec, "protocolVersion") and not is_version_two(spec["protocolVersion"]):
        issues.add((path, "protocolVersion"), f"must be 2, got {show(spec['protocolVersion'])}")
    if given(spec, "version"):
        text = version_text(issues, (path, "version"), spec["version"], sources)
        if text is not None:
            out["version"] = text
    for key in ("contributor", "description", "plugin"):
        if given(spec, key):
            want_str(issues, (path, key), spec[key])
    plugin = spec.get("plugin")
    if kind not in (None, "dockerimage") and isinstance(plugin, str) and plugin != CMD_PLUGIN:
        issues.add((path, "plugin"), f"must be {CMD_PLUGIN} (the only plugin OpenPAI runs)")
    if kind == "dockerimage":  # OpenPAI's schema: no other key on a docker image
        unknown_keys(issues, path, spec, KNOWN)
    _check_uri(issues, path, spec, kind)
    if given(spec, "auth"):
        if kind is not None and kind != "dockerimage":
            issues.add((path, "auth"), "only a dockerimage prerequisite may have auth")
        auth = want_dict(issues, (path, "auth"), spec["auth"])
        if auth is not None:
            auth = without_nulls(issues, (path, "auth"), auth, AUTH_KEYS)
            for key in AUTH_KEYS:  # other keys are kept: OpenPAI's schema allows them
                if given(auth, key):
                    want_str(issues, ((path, "auth"), key), auth[key])
    if given(spec, "require"):
        want_strings(issues, (path, "require"), spec["require"])
    if given(spec, "failurePolicy"):
        want_one_of(issues, (path, "failurePolicy"), spec["failurePolicy"], POLICIES)
    if given(spec, "callbacks"):
        if kind == "dockerimage":  # OpenPAI's checker: no other key on a docker image
            issues.add((path, "callbacks"), "a dockerimage prerequisite has no callbacks")
        _check_callbacks(issues, (path, "callbacks"), spec["callbacks"])
    return out


def _check_uri(issues: Issues, path: Where, spec: dict[str, Any], kind: str | None) -> None:
    uri_path = (path, "uri")
    if not given(spec, "uri"):
        if kind == "dockerimage":
            issues.add(uri_path, "is required")
        return
    uri = spec["uri"]
    if isinstance(uri, list):
        if kind != "data":
            issues.add(uri_path, "must be a string (only a data prerequisite may list several)")
        else:
            want_strings(issues, uri_path, uri, non_empty=True)
    else:
        want_str(issues, uri_path, uri, non_empty=kind == "dockerimage")


def _check_callbacks(issues: Issues, path: Where, value: object) -> None:
    callbacks = want_list(issues, path, value)
    for index, item in enumerate(callbacks or []):
        item_path = (path, index)
        callback = want_dict(issues, item_path, item)
        if callback is None:
            continue
        unknown_keys(issues, item_path, callback, CALLBACK_KEYS)
        callback = without_nulls(issues, item_path, callback, CALLBACK_KEYS, CALLBACK_KEYS[:2])
        if given(callback, "event"):
            want_one_of(issues, (item_path, "event"), callback["event"], EVENTS)
        else:
            issues.add((item_path, "event"), "is required")
        if given(callback, "commands"):
            want_strings(issues, (item_path, "commands"), callback["commands"])
        else:
            issues.add((item_path, "commands"), "is required")
        if given(callback, "failurePolicy"):
            want_one_of(issues, (item_path, "failurePolicy"), callback["failurePolicy"], POLICIES)


def _check_requires(issues: Issues, prereqs: list[dict[str, Any]]) -> None:
    names = {p["name"]: i for i, p in enumerate(prereqs) if isinstance(p.get("name"), str)}
    graph: dict[str, list[str]] = {}
    for index, spec in enumerate(prereqs):
        require = spec.get("require")
        if not isinstance(require, list) or not isinstance(spec.get("name"), str):
            continue
        edges = graph.setdefault(spec["name"], [])
        for position, needed in enumerate(require):
            if not isinstance(needed, str):
                continue
            if needed not in names:
                issues.add(
                    ((("prerequisites", index), "require"), position),
                    f"no prerequisite named {show(needed)}",
                )
            else:
                edges.append(needed)
    reported: set[str] = set()
    for start in graph:
        cycle = _find_cycle(graph, start)
        if cycle and not reported.intersection(cycle):
            reported.update(cycle)
            path = (("prerequisites", names[cycle[0]]), "require")
            issues.add(path, "requirement cycle: " + " -> ".join([*cycle, cycle[0]]))


def _find_cycle(graph: dict[str, list[str]], start: str) -> list[str] | None:
    """A cycle through ``start`` (as a list of names starting there), or None."""
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    visited: set[str] = set()
    while stack:
        node, trail = stack.pop()
        for nxt in graph.get(node, []):
            if nxt == start:
                return trail
            if nxt not in visited:
                visited.add(nxt)
                stack.append((nxt, [*trail, nxt]))
    return None
