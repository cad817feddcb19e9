"""Errors of the job domain that both the lifecycle and its plugins raise (so that neither
imports the other for them)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SubmitError(Exception):
    """A submission refused; ``status`` is the HTTP status that says why."""

    status: int
    errors: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return "\n".join(self.errors)
