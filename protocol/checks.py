"""Checks shared by the v1 and v2 validators: each adds an issue and returns None on failure."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from typing import Any

from protocol.errors import Issues, Where, show

C_IDENTIFIER = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
MAX_COUNT = 2**31 - 1


def is_int(value: object) -> bool:
    """True for ints but not for booleans (``True`` is no CPU count)."""
    return isinstance(value, int) and not isinstance(value, bool)


def whole(value: object) -> object:
    """``value`` as an int when it is a float with no fraction (``2.0`` is 2, as JavaScript, whose
    numbers OpenPAI reads, makes no difference between them); any other value unchanged."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= MAX_COUNT:
        return int(value)
    return value


def want_int(
    issues: Issues, path: Where, value: object, minimum: int, *, minus_one: bool = False
) -> int | None:
    """An integer >= ``minimum`` (or -1 when ``minus_one``), at most ``MAX_COUNT``; a whole float
    (``2.0``) counts as the integer it equals."""
    if isinstance(value, float) and not value.is_integer():
        issues.add(path, f"must be a whole number (an integer), got {show(value)}")
        return None
    value = whole(value)
    if is_int(value):
        assert isinstance(value, int)
        if (value >= minimum or (minus_one and value == -1)) and value <= MAX_COUNT:
            return value
        if value > MAX_COUNT:
            issues.add(path, f"must be an integer <= {MAX_COUNT}, got {show(value)}")
            return None
    if minus_one:
        issues.add(path, f"must be -1 or an integer >= {minimum}, got {show(value)}")
    else:
        issues.add(path, f"must be an integer >= {minimum}, got {show(value)}")
    return None


def want_str(issues: Issues, path: Where, value: object, *, non_empty: bool = False) -> str | None:
    if not isinstance(value, str):
        issues.add(path, f"must be a string, got {show(value)}")
        return None
    if non_empty and not value.strip():
        issues.add(path, "must not be empty")
        return None
    return value


def want_match(issues: Issues, path: Where, value: object, pattern: re.Pattern[str]) -> str | None:
    text = want_str(issues, path, value)
    if text is None:
        return None
    if not pattern.match(text):
        issues.add(path, f"must match {pattern.pattern}, got {show(text)}")
        return None
    return text


def want_bool(issues: Issues, path: Where, value: object) -> bool | None:
    if not isinstance(value, bool):
        issues.add(path, f"must be true or false, got {show(value)}")
        return None
    return value


def want_dict(issues: Issues, path: Where, value: object) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        issues.add(path, f"must be an object, got {show(value)}")
        return None
    return value


def want_list(issues: Issues, path: Where, value: object) -> list[Any] | None:
    if not isinstance(value, list):
        issues.add(path, f"must be a list, got {show(value)}")
        return None
    return value


def want_strings(
    issues: Issues, path: Where, value: object, *, non_empty: bool = False
) -> list[str] | None:
    """A list of strings (each item checked, so every bad one is reported)."""
    if not isinstance(value, list):
        issues.add(path, f"must be a list of strings, got {show(value)}")
        return None
    if non_empty and not value:
        issues.add(path, "must be a non-empty list of strings")
        return None
    good = True
    for index, item in enumerate(value):
        if not isinstance(item, str):
            issues.add((path, index), f"must be a string, got {show(item)}")
            good = False
    return list(value) if good else None


def want_one_of(issues: Issues, path: Where, value: object, choices: Iterable[str]) -> str | None:
    options = list(choices)
    if isinstance(value, str) and value in options:
        return value
    issues.add(path, f"must be one of {', '.join(options)}; got {show(value)}")
    return None


def unknown_keys(
    issues: Issues, path: Where, mapping: dict[str, Any], allowed: Iterable[str]
) -> None:
    """An issue for each key of ``mapping`` that is not ``allowed`` (with a guess at the typo)."""
    known = tuple(allowed)
    names = frozenset(known)  # a key is looked up at once, not compared with each name
    for key in mapping:
        if key not in names:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f' (did you mean "{close[0]}"?)' if close else ""
            issues.add((path, key), f"unknown field{hint}")


NULL = "must not be null (leave the field out for its default)"


def without_nulls(
    issues: Issues,
    path: Where,
    mapping: dict[str, Any],
    known: Iterable[str],
    required: Iterable[str] = (),
) -> dict[str, Any]:
    """``mapping`` without the null values of its ``known`` keys, each reported as OpenPAI's
    schema reports it (a ``required`` one is left to its own "is required" check)."""
    names = frozenset(known)
    needed = frozenset(required)
    result: dict[str, Any] = {}
    for key, value in mapping.items():
        if value is None and key in names:
            if key not in needed:
                issues.add((path, key), NULL)
            continue
        result[key] = value
    return result


def given(mapping: dict[str, Any], key: str) -> bool:
    """A key counts as given when present and not null (YAML ``key:`` with no value)."""
    return mapping.get(key) is not None
