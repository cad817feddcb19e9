"""Why a task ended: match its exit code, the backend's diagnostics and the tail of its logs
against ``jobs/exit-spec.yaml`` and give a phrase, a type, a reason, a solution and the lines
that matched. Pure Python (the caller reads the logs).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

SPEC_PATH = Path(__file__).with_name("exit-spec.yaml")
LOG_TAIL_BYTES = 64 * 1024
MAX_LINES = 5


@dataclass(frozen=True)
class Rule:
    id: str
    phrase: str
    type: str
    reason: str
    solution: str
    stopped: bool | None = None
    exit_codes: tuple[int, ...] = ()
    diagnostics: tuple[re.Pattern[str], ...] = ()
    patterns: tuple[re.Pattern[str], ...] = ()


@dataclass(frozen=True)
class Explanation:
    id: str
    phrase: str
    type: str
    reason: str
    solution: str
    exit_code: int | None
    lines: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _rule(raw: dict[str, Any]) -> Rule:
    return Rule(
        id=str(raw["id"]),
        phrase=str(raw["phrase"]),
        type=str(raw["type"]),
        reason=str(raw["reason"]),
        solution=str(raw["solution"]),
        stopped=raw.get("stopped"),
        exit_codes=tuple(int(c) for c in raw.get("exitCodes", [])),
        diagnostics=tuple(re.compile(p) for p in raw.get("diagnostics", [])),
        patterns=tuple(re.compile(p, re.MULTILINE) for p in raw.get("patterns", [])),
    )


@cache
def rules(path: Path = SPEC_PATH) -> tuple[Rule, ...]:
    return tuple(_rule(raw) for raw in yaml.safe_load(path.read_text()))


def _matches(
    rule: Rule, code: int | None, diagnostics: str, stopped: bool, log: str
) -> tuple[list[str], dict[str, str]] | None:
    """(matched lines, named groups) when ``rule`` explains the exit, else None."""
    if rule.stopped is not None and rule.stopped != stopped:
        return None
    if rule.exit_codes and code not in rule.exit_codes:
        return None
    if rule.diagnostics and not any(p.search(diagnostics) for p in rule.diagnostics):
        return None
    lines: list[str] = []
    groups: dict[str, str] = {}
    for pattern in rule.patterns:
        for found in pattern.finditer(log):
            lines.append(found.group(0).strip())
            groups = {**{k: v for k, v in found.groupdict().items() if v}, **groups}
            if len(lines) >= MAX_LINES:
                break
    if rule.patterns and not lines:
        return None
    if not (rule.stopped or rule.exit_codes or rule.diagnostics or rule.patterns):
        return None
    return lines, groups


def _fill(text: str, values: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), text)


def explain(
    exit_code: int | None, diagnostics: str = "", log: str = "", stopped: bool = False
) -> Explanation | None:
    """The first rule that explains a finished task; None when it succeeded."""
    if exit_code == 0 and not stopped:
        return None
    for rule in rules():
        found = _matches(rule, exit_code, diagnostics, stopped, log)
        if found is None:
            continue
        lines, groups = found
        values = {"code": str(exit_code), **groups}
        return Explanation(
            rule.id,
            _fill(rule.phrase, values),
            rule.type,
            _fill(rule.reason, values),
            _fill(rule.solution, values),
            exit_code,
            lines,
        )
    what = f"exit code {exit_code}" if exit_code is not None else "no exit code"
    return Explanation(
        "unknown",
        f"Failed with {what}",
        "user",
        f"the task ended with {what}",
        "see the task's logs",
        exit_code,
        [],
    )
