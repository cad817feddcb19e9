"""Turn parsed data into plain JSON data, refusing what JSON cannot hold.

YAML can produce dates, sets, binary strings, non-string keys, NaN, and (through aliases)
trees far bigger than their text; a caller of ``normalise`` can even pass cycles. Here dates
become ISO strings, YAML floats plain floats, and everything else outside JSON is an issue.
Depth and size are bounded so that no later step can recurse or loop without end.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

from protocol.errors import Issues, join, show

MAX_DEPTH = 64
MAX_NODES = 200_000
MAX_INT_BITS = 256


# Values kept as they are (exactly these classes: a subclass may be anything), and ints that
# are not too large; a float may be infinite or remember its spelling, so floats are walked.
_LEAVES = frozenset({str, bool, type(None)})
_SMALL = 2**MAX_INT_BITS


class _Budget:
    def __init__(self) -> None:
        self.nodes = 0
        self.exhausted = False
        self.float_sources: dict[str, str] = {}


def to_plain(value: object, issues: Issues) -> tuple[Any, dict[str, str]]:
    """A copy of ``value`` with only dict/list/str/int/float/bool/None; issues for the rest.

    Also returns how each YAML float was spelt, by path (``{"version": "1.10"}``).
    """
    budget = _Budget()
    result = _walk(value, (), 0, budget, issues)
    if budget.exhausted:
        issues.add("", f"the document is too big once expanded (more than {MAX_NODES} values)")
    return result, budget.float_sources


def _path(parts: tuple[str | int, ...]) -> str:
    """The path of ``parts``, joined only when needed (for an issue or a float's spelling)."""
    path = ""
    for part in parts:
        path = join(path, part)
    return path


def _walk(
    value: object, parts: tuple[str | int, ...], depth: int, budget: _Budget, issues: Issues
) -> Any:
    if budget.exhausted:
        return None
    budget.nodes += 1
    if budget.nodes > MAX_NODES:
        budget.exhausted = True
        return None
    if depth > MAX_DEPTH:
        issues.add(_path(parts), f"nested more than {MAX_DEPTH} levels deep")
        return None
    kind = value.__class__
    if kind is dict:  # the common cases first (exactly these classes: no other check matches)
        return _walk_dict(value, parts, depth, budget, issues)  # type: ignore[arg-type]
    if kind is list and depth < MAX_DEPTH:
        return _walk_list(value, parts, depth, budget, issues)  # type: ignore[arg-type]
    if value is None or isinstance(value, _BOOL_STR):
        return value
    if isinstance(value, int):
        if value.bit_length() > MAX_INT_BITS:
            issues.add(_path(parts), f"the integer is too large ({show(value)})")
            return None
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            issues.add(_path(parts), f"must be a finite number, got {value!r}")
            return None
        source = getattr(value, "source", "")
        if source:
            budget.float_sources[_path(parts)] = source
        return float(value)
    if isinstance(value, _DATES):
        return value.isoformat()
    if isinstance(value, dict):
        return _walk_dict(value, parts, depth, budget, issues)
    if isinstance(value, _SEQUENCES):
        if depth < MAX_DEPTH:
            return _walk_list(value, parts, depth, budget, issues)
        return [
            _walk(item, (*parts, index), depth + 1, budget, issues)
            for index, item in enumerate(value)
        ]
    issues.add(
        _path(parts),
        f"must be JSON data (string, number, boolean, list, object), got {show(value)}",
    )
    return None


_BOOL_STR = (bool, str)
_DATES = (dt.date, dt.datetime)
_SEQUENCES = (list, tuple)


def _walk_dict(
    value: dict[Any, Any],
    parts: tuple[str | int, ...],
    depth: int,
    budget: _Budget,
    issues: Issues,
) -> dict[str, Any]:
    result: dict[str, Any] = {}
    leaves = depth < MAX_DEPTH  # a leaf below may be taken as it is (counted, not walked)
    for key, item in value.items():
        if not isinstance(key, str):
            issues.add(_path(parts), f"keys must be strings, got {show(key)}")
            continue
        kind = item.__class__  # a leaf (one of _LEAVES, or a small int)
        if (
            leaves
            and (kind in _LEAVES or (kind is int and -_SMALL < item < _SMALL))
            and budget.nodes < MAX_NODES
        ):
            budget.nodes += 1
            result[key] = item
        else:
            result[key] = _walk(item, (*parts, key), depth + 1, budget, issues)
    return result


def _walk_list(
    value: list[Any] | tuple[Any, ...],
    parts: tuple[str | int, ...],
    depth: int,
    budget: _Budget,
    issues: Issues,
) -> list[Any]:
    """A list below MAX_DEPTH, whose leaves may be taken as they are."""
    items: list[Any] = []
    for index, item in enumerate(value):
        kind = item.__class__
        if (kind in _LEAVES or (kind is int and -_SMALL < item < _SMALL)) and (
            budget.nodes < MAX_NODES
        ):
            budget.nodes += 1
            items.append(item)
        else:
            items.append(_walk(item, (*parts, index), depth + 1, budget, issues))
    return items
