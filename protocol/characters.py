"""Characters no stored text can hold: NUL (PostgreSQL refuses it in text and JSON) and lone
surrogates (``"\\ud800"`` in JSON or YAML: half of a UTF-16 pair, which UTF-8 cannot encode).

A job's strings come from its text, which is UTF-8 (so without surrogates) and whose parsers
refuse a raw NUL: only an escape (``\\u0000``, ``\\0``, ``\\x00``, ``\\ud800``) makes one. The
document is walked only when its text has such an escape, or when it was handed over parsed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from protocol.errors import Issues, Where, join

UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_ESCAPES = re.compile(r"\\[0xuU]|[\x00\ud800-\udfff]")
_ESCAPES_BYTES = re.compile(rb"\\[0xuU]|\x00")


def unstorable(text: str) -> str | None:
    """Why ``text`` cannot be stored, naming the character, or None when it can."""
    found = UNSTORABLE.search(text)
    if found is None:
        return None
    if found.group() == "\x00":
        return "contains a NUL character (\\u0000), which text here cannot hold"
    code = f"\\u{ord(found.group()):04x}"
    return f"contains a lone surrogate ({code}), half of a UTF-16 pair and not a character"


def unstorable_value(value: object) -> str | None:
    return unstorable(value) if isinstance(value, str) else None


def may_hold_unstorable(text: str | bytes) -> bool:
    """Whether the document parsed from ``text`` may hold an unstorable character."""
    if isinstance(text, str):
        return _ESCAPES.search(text) is not None
    return _ESCAPES_BYTES.search(text) is not None


def check_characters(
    document: object,
    issues: Issues,
    problem: Callable[[object], str | None] = unstorable_value,
    max_depth: int | None = None,
) -> None:
    """An issue for every key with an unstorable character and every value ``problem`` finds
    one in (by default: strings with an unstorable character), at its path, in document
    order; with ``max_depth``, for what is nested deeper than that. Iterative: the document
    may be deeper than Python's stack."""
    stack: list[tuple[object, Where, int]] = [(document, "", 0)]
    while stack:
        value, where, depth = stack.pop()
        if isinstance(value, dict | list) and max_depth is not None and depth >= max_depth:
            issues.add(_spell(where), f"nested more than {max_depth} levels deep")
        elif isinstance(value, dict):
            for key, item in reversed(value.items()):
                key_problem = unstorable(key) if isinstance(key, str) else None
                if key_problem:
                    issues.add(_spell(where), f"the key {json.dumps(key[:60])} {key_problem}")
                else:
                    stack.append((item, (where, key), depth + 1))
        elif isinstance(value, list):
            stack.extend((value[i], (where, i), depth + 1) for i in range(len(value) - 1, -1, -1))
        else:
            found = problem(value)
            if found:
                issues.add(_spell(where), found)


def _spell(where: Where) -> str:
    """``errors.spell`` without recursion (the document may be deeper than Python's stack)."""
    keys: list[str | int] = []
    while not isinstance(where, str):
        where, key = where
        keys.append(key)
    path = where
    for key in reversed(keys):
        path = join(path, key)
    return path
