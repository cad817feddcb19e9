"""Commands of a task role with every ``<% %>`` reference resolved (secrets in clear).

``render_role`` folds seed 001's callbacks in: the ``containerStart`` (and ``taskStarts``)
callbacks of the prerequisites the role uses come first in ``pre_commands`` (each after what
it requires), then the deployment's ``preCommands``; ``post_commands`` holds the deployment's
``postCommands`` then the ``containerExit`` (and ``taskSucceeds``) callbacks in reverse
order. A callback whose failure policy is ``ignore`` is wrapped as ``{ ...; } || true``.
(The task runtime runs ``taskSucceeds`` callbacks after a success only; this folded list
cannot say so.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from protocol import references
from protocol.errors import ProtocolError, join, show
from protocol.prereqs import START_EVENTS
from protocol.references import Scope, UnknownReference

DEFAULT_FAILURE_POLICY = "fail"


@dataclass(frozen=True)
class RoleCommands:
    pre_commands: list[str]
    commands: list[str]
    post_commands: list[str]


@dataclass(frozen=True)
class Callback:
    prerequisite: str
    event: str  # one of prereqs.EVENTS
    commands: list[str]
    failure_policy: str  # "fail" or "ignore"


def render_role(
    job: dict[str, Any], role: str, deployment: str | None = None, *, callbacks: bool = True
) -> RoleCommands:
    """The role's commands; ``deployment`` defaults to ``defaults.deployment`` (or none).

    With ``callbacks=False`` the prerequisite callbacks are left out (the task runtime runs
    them itself, from ``render_callbacks``, with their failure policies)."""
    spec = _role(job, role)
    name = deployment if deployment is not None else job.get("defaults", {}).get("deployment")
    entry: dict[str, Any] = {}
    if name is not None:
        chosen = [d for d in job.get("deployments", []) if d.get("name") == name]
        if not chosen:
            raise ProtocolError.single("deployment", f"no deployment named {show(name)}")
        entry = chosen[0].get("taskRoles", {}).get(role) or {}
    prereqs = references.prerequisites_by_name(job)
    scope = references.role_scope(job, role, prereqs)
    where = join("taskRoles", role)
    folded = _callbacks(job, spec, prereqs) if callbacks else []
    pre = [cmd for cb in folded if cb.event in START_EVENTS for cmd in _wrapped(cb)]
    post = [cmd for cb in folded if cb.event not in START_EVENTS for cmd in _wrapped(cb)]
    return RoleCommands(
        pre_commands=pre + _render(entry.get("preCommands", []), scope, f"{name}.preCommands"),
        commands=_render(spec.get("commands", []), scope, join(where, "commands")),
        post_commands=_render(entry.get("postCommands", []), scope, f"{name}.postCommands") + post,
    )


def render_callbacks(job: dict[str, Any], role: str) -> list[Callback]:
    """The callbacks of the prerequisites ``role`` uses: start ones (containerStart,
    taskStarts) in dependency order (each after what it requires), then exit ones
    (containerExit, taskSucceeds) in the reverse order."""
    return _callbacks(job, _role(job, role), references.prerequisites_by_name(job))


def _callbacks(
    job: dict[str, Any], spec: dict[str, Any], prereqs: dict[str, dict[str, Any]]
) -> list[Callback]:
    wanted = list(spec.get("prerequisites") or [])
    for key in ("dockerImage", "data", "script", "output"):
        if isinstance(spec.get(key), str) and spec[key] not in wanted:
            wanted.append(spec[key])
    order: list[str] = []
    _visit_all(wanted, prereqs, order, set())
    starts: list[Callback] = []
    exits: list[Callback] = []
    for name in order:
        prereq = prereqs[name]
        listed = prereq.get("callbacks") or []
        if not listed:
            continue
        scope = references.prerequisite_scope(job, prereq, auth=False)
        for index, callback in enumerate(listed):
            path = f"prerequisites.{name}.callbacks[{index}].commands"
            rendered = Callback(
                prerequisite=name,
                event=callback.get("event", ""),
                commands=_render(callback.get("commands", []), scope, path),
                failure_policy=callback.get("failurePolicy")
                or prereq.get("failurePolicy")
                or DEFAULT_FAILURE_POLICY,
            )
            (starts if rendered.event in START_EVENTS else exits).append(rendered)
    exits.reverse()
    return starts + exits


def _visit_all(names: list[str], prereqs: dict[Any, Any], order: list[str], seen: set[str]) -> None:
    for name in names:
        if name in seen or name not in prereqs:
            continue
        seen.add(name)
        _visit_all(list(prereqs[name].get("require") or []), prereqs, order, seen)
        order.append(name)


def _role(job: dict[str, Any], role: str) -> dict[str, Any]:
    roles = job.get("taskRoles") if isinstance(job, dict) else None
    if not isinstance(roles, dict) or not isinstance(roles.get(role), dict):
        raise ProtocolError.single("taskRoles", f"no task role named {show(role)}")
    spec: dict[str, Any] = roles[role]
    return spec


def _render(texts: list[str], scope: Scope, path: str) -> list[str]:
    result = []
    for index, text in enumerate(texts):
        try:
            result.append(references.render(text, scope))
        except UnknownReference as exc:
            raise ProtocolError.single(join(path, index), str(exc)) from None
    return result


def _wrapped(callback: Callback) -> list[str]:
    if callback.failure_policy != "ignore":
        return callback.commands
    return ["{\n" + command + "\n} || true" for command in callback.commands]


def render_registry_auth(job: dict[str, Any], role: str) -> dict[str, str] | None:
    """``{registry, username, password}`` of the role's docker image, references resolved
    (secrets in clear: for the backend's image pull secret only); None without ``auth``."""
    image = _role(job, role).get("dockerImage")
    prereq = references.prerequisites_by_name(job).get(image) if isinstance(image, str) else None
    auth = prereq.get("auth") if prereq else None
    if not isinstance(auth, dict) or not auth.get("username"):
        return None
    scope = references.prerequisite_scope(job, prereq or {}, auth=True)
    return {
        "registry": references.render(str(auth.get("registryuri") or "docker.io"), scope),
        "username": references.render(str(auth.get("username", "")), scope),
        "password": references.render(str(auth.get("password", "")), scope),
    }
