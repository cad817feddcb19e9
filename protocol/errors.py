"""The one exception the protocol package raises, and the helpers that build its issues."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TypeAlias


@dataclass(frozen=True)
class ProtocolIssue:
    """One problem found in a job: ``path`` names where ("" for the whole document)."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ProtocolError(Exception):
    """A job that cannot be used; ``issues`` lists every problem found, in document order."""

    def __init__(self, issues: list[ProtocolIssue]) -> None:
        self.issues = list(issues)
        super().__init__("\n".join(str(issue) for issue in self.issues))

    @classmethod
    def single(cls, path: str, message: str) -> ProtocolError:
        return cls([ProtocolIssue(path, message)])


@dataclass
class Issues:
    """Collects issues while a document is checked, so that all are reported at once."""

    items: list[ProtocolIssue] = field(default_factory=list)

    def add(self, path: Where, message: str) -> None:
        self.items.append(ProtocolIssue(spell(path), message))

    def raise_if_any(self) -> None:
        if self.items:
            raise ProtocolError(self.items)

    def __bool__(self) -> bool:
        return bool(self.items)


# Where a value is: a path string, or (lazily, as checks go down) ``(parent, key)``, which
# ``spell`` joins only when an issue is reported: most values checked have none.
Where: TypeAlias = "str | tuple[Where, str | int]"


def spell(path: Where) -> str:
    """The path string of ``path``: ``spell((("taskRoles", "w"), "commands"))`` is
    "taskRoles.w.commands", as ``join`` spells it."""
    if isinstance(path, str):
        return path
    parent, key = path
    return join(spell(parent), key)


def join(path: str, key: str | int) -> str:
    """``join("taskRoles", "worker") == "taskRoles.worker"``; ints become ``[index]``."""
    if key.__class__ is str:  # the common case first (a str subclass is handled below)
        return f"{path}.{key}" if path else key
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def show(value: object) -> str:
    """A short, safe rendering of a value for a message (JSON spelling, never huge)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if value.bit_length() > 64:
            return f"an integer of {value.bit_length()} bits"
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        text = json.dumps(value[:60], ensure_ascii=False)
        return text[:-1] + '..."' if len(value) > 60 else text
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    return f"a value of type {type(value).__name__}"
