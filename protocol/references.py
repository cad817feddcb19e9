"""``<% ... %>`` references: checked when a job is loaded, rendered when a task starts.

Grammar (whitespace inside the brackets is free): a root, then ``.key`` / ``[index]`` steps.

* ``$parameters`` / ``$secrets``: the job's objects (``<% $parameters %>`` alone is the JSON
  of the whole object).
* ``$data`` / ``$output`` / ``$script``: the prerequisite the task role selects
  (``<% $data.uri[0] %>``, ``<% $script.version %>``); only in a task role's commands and
  its deployment pre/post commands.
* ``this.parameters``: the prerequisite whose callback holds the command (seed 001).

A docker image's ``auth`` may name ``$secrets`` only (seed 000: "Scope of reference
`$secrets`: ... all task roles and docker image's `auth` field", while ``$parameters`` "is
shared among all task roles"; OpenPAI's rest-server renders auth with ``$secrets`` alone,
microsoft/pai ``src/rest-server/src/middlewares/v2/protocol.js``). No other root exists: a
``$dockerImage`` is none of seed 000's references, and OpenPAI renders it as nothing.

A string renders as itself, null as "", booleans as true/false, lists and objects as JSON.
``[0]`` on a string URI is the string itself (a data prerequisite may give one URI).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from protocol.errors import Issues, Where

REFERENCE = re.compile(r"<%(.*?)%>", re.DOTALL)
_SHAPE = re.compile(r"^(\$[A-Za-z_]+|this\.parameters)((?:\.[^.\[\]\s]+|\[[0-9]+\])*)$")
_STEP = re.compile(r"\.([^.\[\]\s]+)|\[([0-9]+)\]")
# The common case, a root and one key (``<% $data.name %>``): resolved without normalising.
_SIMPLE = re.compile(r"\s*(\$[A-Za-z_]+|this\.parameters)\.([^.\[\]\s]+)\s*\Z")
SELECTIONS = {"$data": "data", "$output": "output", "$script": "script"}
_ROLE_ROOTS = tuple(SELECTIONS.items())  # (root, role's key)


UNCHECKED = object()  # a root whose value was invalid: references into it are not reported
_MISSING = object()
# Each simple reference's (root, key), by its inner text: a job names the same few many times,
# and a dictionary lookup is a tenth of the regular expression's time. Bounded, as texts come
# from users.
_SIMPLE_SHAPES: dict[str, tuple[str, str] | None] = {}
_MAX_SHAPES = 4096


def _simple(reference: str) -> tuple[str, str] | None:
    """``(root, key)`` of a reference such as `` $data.name ``, else None."""
    shape = _SIMPLE_SHAPES.get(reference, _MISSING)
    if shape is _MISSING:
        match = _SIMPLE.match(reference)
        shape = (match.group(1), match.group(2)) if match else None
        if len(_SIMPLE_SHAPES) < _MAX_SHAPES:
            _SIMPLE_SHAPES[reference] = shape
    return shape  # type: ignore[return-value]


class UnknownReference(Exception):
    """A reference that names nothing; ``str()`` is the message for the user."""


@dataclass
class Scope:
    """What the references of one string may name; ``absent`` says why a root is missing."""

    roots: dict[str, Any] = field(default_factory=dict)
    absent: dict[str, str] = field(default_factory=dict)


def role_scope(
    job: dict[str, Any], role: str, prereqs: dict[str, dict[str, Any]] | None = None
) -> Scope:
    """The scope of a task role's commands and its deployment pre/post commands
    (``prereqs``: ``prerequisites_by_name(job)``, when the caller has it already)."""
    spec = job.get("taskRoles", {}).get(role, {})
    if prereqs is None:
        prereqs = prerequisites_by_name(job)
    scope = _base(job)
    for root, key in _ROLE_ROOTS:
        selected = spec.get(key) if isinstance(spec, dict) else None
        if isinstance(selected, str) and isinstance(prereqs.get(selected), dict):
            scope.roots[root] = prereqs[selected]
        elif isinstance(selected, str):  # names no prerequisite: reported on its own
            scope.roots[root] = UNCHECKED
        else:
            scope.absent[root] = f"task role {role} selects no {key}"
    scope.absent["this.parameters"] = "only inside a prerequisite's callbacks"
    return scope


def prerequisite_scope(job: dict[str, Any], prereq: dict[str, Any], *, auth: bool) -> Scope:
    """The scope of a prerequisite's callback commands (or, with ``auth``, its auth fields)."""
    scope = _base(job)
    for root in SELECTIONS:
        scope.absent[root] = "only in a task role's commands"
    if auth:
        del scope.roots["$parameters"]
        scope.absent["$parameters"] = "a docker image's auth may name $secrets only"
        scope.absent["this.parameters"] = "only inside a prerequisite's callbacks"
    else:
        scope.roots["this.parameters"] = prereq
    return scope


def _base(job: dict[str, Any]) -> Scope:
    return Scope(
        roots={"$parameters": job.get("parameters", {}), "$secrets": job.get("secrets", {})}
    )


def resolve(reference: str, scope: Scope) -> Any:
    """The value a reference's inner text names; raises UnknownReference."""
    simple = _simple(reference)
    if simple is not None:
        root, key = simple
        value = scope.roots.get(root, _MISSING)
        if value is UNCHECKED:
            return ""
        if value.__class__ is dict and key in value:
            return value[key]
    text = " ".join(reference.split())
    shape = _SHAPE.match(text)
    if shape is None:
        raise UnknownReference(f"malformed reference <% {text} %>")
    root, steps = shape.group(1), shape.group(2)
    if root not in scope.roots:
        reason = scope.absent.get(root)
        raise UnknownReference(f"unknown reference {text}" + (f" ({reason})" if reason else ""))
    value = scope.roots[root]
    for key, index in _STEP.findall(steps):
        if value is UNCHECKED:
            return ""
        if key and isinstance(value, dict) and key in value:
            value = value[key]
        elif index and isinstance(value, list) and int(index) < len(value):
            value = value[int(index)]
        elif index == "0" and isinstance(value, str):
            continue
        else:
            raise UnknownReference(f"unknown reference {text}")
    return value


def as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if value.__class__ is int:  # as JSON spells it
        return str(value)
    return _JSON.encode(value)


# What ``json.dumps(value, ensure_ascii=False, separators=(",", ":"))`` uses, built once.
_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def render(text: str, scope: Scope) -> str:
    """``text`` with each reference replaced; raises UnknownReference."""
    if text.__class__ is str and "<%" not in text:
        return text
    parts = REFERENCE.split(text)  # text, reference, text, ..., text
    for index in range(1, len(parts), 2):
        parts[index] = as_text(resolve(parts[index], scope))
    return "".join(parts)


def check(issues: Issues, path: Where, text: object, scope: Scope) -> None:
    """An issue at ``path`` for each reference of ``text`` that names nothing."""
    if isinstance(text, str) and "<%" in text:
        _check(issues, path, text, scope)


def _check(issues: Issues, path: Where, text: str, scope: Scope) -> None:
    roots = scope.roots
    if "<%" in REFERENCE.sub("", text):
        issues.add(path, 'a "<%" without its closing "%>"')
    for reference in REFERENCE.findall(text):
        simple = _simple(reference)
        if simple is not None:  # resolve's fast path, inlined
            root, key = simple
            value = roots.get(root, _MISSING)
            if value is UNCHECKED or (value.__class__ is dict and key in value):
                continue
        try:
            resolve(reference, scope)
        except UnknownReference as exc:
            issues.add(path, str(exc))


def check_strings(issues: Issues, path: Where, texts: object, scope: Scope) -> None:
    if isinstance(texts, list):
        for index, text in enumerate(texts):
            if isinstance(text, str) and "<%" in text:
                _check(issues, (path, index), text, scope)


def check_job(issues: Issues, job: dict[str, Any], unchecked: frozenset[str] = frozenset()) -> None:
    """Every reference in a (structurally checked) canonical job, with the path holding it.

    ``unchecked`` names roots ("$parameters", "$secrets") whose value was invalid.
    """
    roles = job.get("taskRoles", {})
    if unchecked:
        job = {**job, **{root[1:]: UNCHECKED for root in unchecked}}
    for index, prereq in enumerate(job.get("prerequisites", [])):
        if not isinstance(prereq, dict):
            continue
        auth = prereq.get("auth")
        if isinstance(auth, dict):
            scope = prerequisite_scope(job, prereq, auth=True)
            for key, value in auth.items():
                if isinstance(value, str) and "<%" in value:
                    _check(issues, ((("prerequisites", index), "auth"), key), value, scope)
        callbacks = prereq.get("callbacks")
        if isinstance(callbacks, list):
            scope = prerequisite_scope(job, prereq, auth=False)
            for position, callback in enumerate(callbacks):
                if isinstance(callback, dict):
                    where: Where = (((("prerequisites", index), "callbacks"), position), "commands")
                    check_strings(issues, where, callback.get("commands"), scope)
    scopes: dict[str, Scope] = {}  # each role's scope, built once
    prereqs = prerequisites_by_name(job)

    def scope_of(role: str) -> Scope:
        if role not in scopes:
            scopes[role] = role_scope(job, role, prereqs)
        return scopes[role]

    for name, spec in roles.items():
        if isinstance(spec, dict):
            where = (("taskRoles", name), "commands")
            check_strings(issues, where, spec.get("commands"), scope_of(name))
    for index, deployment in enumerate(job.get("deployments", [])):
        entries = deployment.get("taskRoles") if isinstance(deployment, dict) else None
        if not isinstance(entries, dict):
            continue
        for name, entry in entries.items():
            if name not in roles or not isinstance(entry, dict):
                continue
            scope = scope_of(name)
            base = ((("deployments", index), "taskRoles"), name)
            for key in ("preCommands", "postCommands"):
                check_strings(issues, (base, key), entry.get(key), scope)


def prerequisites_by_name(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    prereqs = job.get("prerequisites")
    return {
        p["name"]: p
        for p in (prereqs if isinstance(prereqs, list) else [])
        if isinstance(p, dict) and isinstance(p.get("name"), str)
    }
