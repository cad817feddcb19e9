"""Hide what a job marks as secret before it is shown or exported."""

from __future__ import annotations

import copy
from typing import Any

from jobs.protocol.references import REFERENCE

SECRET_MASK = "******"  # noqa: S105 - the mask, not a password


def mask_secrets(job: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of ``job`` with every ``secrets`` value replaced by ``SECRET_MASK``, and
    every prerequisite's literal ``auth.password`` (one that is not a ``<% %>`` reference)."""
    masked: dict[str, Any] = _copy(job)
    secrets = masked.get("secrets")
    if isinstance(secrets, dict):
        for key in secrets:
            secrets[key] = SECRET_MASK
    prereqs = masked.get("prerequisites")
    for prereq in prereqs if isinstance(prereqs, list) else []:
        auth = prereq.get("auth") if isinstance(prereq, dict) else None
        if isinstance(auth, dict) and "password" in auth:
            password = auth["password"]
            if not (isinstance(password, str) and REFERENCE.fullmatch(password.strip())):
                auth["password"] = SECRET_MASK
    return masked


def _copy(value: Any) -> Any:
    """A deep copy of JSON data (dicts, lists, scalars), much faster than ``copy.deepcopy``;
    anything else (and shared or cyclic containers, which JSON data has none of) goes to
    ``copy.deepcopy``."""
    try:
        return _copy_json(value, 0)
    except _NotJson:
        return copy.deepcopy(value)


class _NotJson(Exception):
    pass


_SCALARS = (str, int, float, bool, type(None))


def _copy_json(value: Any, depth: int) -> Any:
    """A shallow copy of each dict and list (in C), whose containers are then replaced by
    their own copies (replacing the value of a key does not disturb iterating a dict)."""
    kind = type(value)
    if kind is dict:
        if depth > 200:
            raise _NotJson
        result = value.copy()
        for key, item in result.items():
            if type(item) not in _SCALARS:
                result[key] = _copy_json(item, depth + 1)
        return result
    if kind is list:
        if depth > 200:
            raise _NotJson
        items = value.copy()
        for index, item in enumerate(items):
            if type(item) not in _SCALARS:
                items[index] = _copy_json(item, depth + 1)
        return items
    if kind in _SCALARS:
        return value
    raise _NotJson
