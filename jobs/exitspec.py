"""Why a task ended: match its exit code, the backend's diagnostics and the tail of its logs
against ``jobs/exit-spec.yaml`` and give a phrase, a type, a reason, a solution, the lines that
matched and the one that matters most (``quote``: the last match, e.g. a traceback's last line).
Pure Python: the caller reads the logs, and masks the job's secrets in them first.
"""

from __future__ import annotations

import re
import signal
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
    signaled: bool | None = None  # the exit code says a signal ended the process (128 + n)
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
    quote: str = ""  # the log line that matters most, quoted in the reason

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
        signaled=raw.get("signaled"),
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
    """(matched lines, named groups of the last match) when ``rule`` explains the exit."""
    if rule.stopped is not None and rule.stopped != stopped:
        return None
    if rule.signaled is not None and rule.signaled != (signal_of(code) is not None):
        return None
    if rule.exit_codes and code not in rule.exit_codes:
        return None
    if rule.diagnostics and not any(p.search(diagnostics) for p in rule.diagnostics):
        return None
    found = sorted(
        (m for pattern in rule.patterns for m in pattern.finditer(log)), key=lambda m: m.start()
    )
    if rule.patterns and not found:
        return None
    if not (rule.stopped or rule.signaled or rule.exit_codes or rule.diagnostics or found):
        return None
    # The last matches: the end of the log is nearest to why the task ended.
    lines = [_line(m) for m in found[-MAX_LINES:]]
    groups = {k: v.strip() for k, v in found[-1].groupdict().items() if v} if found else {}
    return lines, groups


def _line(match: re.Match[str]) -> str:
    """What a match quotes: its ``quote`` group (e.g. a traceback's last line) or all of it,
    with the path of the task's own scripts shortened (``/work/…/user.sh: line 3: …``)."""
    text = (match.groupdict().get("quote") or match.group(0)).strip()
    return SCRIPT_PATH.sub(r"\1", text)


SCRIPT_PATH = re.compile(r"^\S*/((?:user|bootstrap)\.sh:)")


def signal_of(code: int | None) -> signal.Signals | None:
    """The signal an exit code of ``128 + n`` stands for, if n is one."""
    if code is None or not 128 < code < 128 + 65:
        return None
    try:
        return signal.Signals(code - 128)
    except ValueError:
        return None


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
        quote = lines[-1] if lines else ""
        values = {"code": str(exit_code), **_signal_values(exit_code), **groups, "quote": quote}
        return Explanation(
            rule.id,
            _fill(rule.phrase, values),
            rule.type,
            _fill(rule.reason, values),
            _fill(rule.solution, values),
            exit_code,
            lines,
            quote,
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


def _signal_values(code: int | None) -> dict[str, str]:
    sig = signal_of(code)
    return {"signal": str(sig.value), "signame": sig.name} if sig else {}


# -- OpenPAI's codes for the same failures --------------------------------------------------

OPENPAI_CODES_PATH = Path(__file__).with_name("openpai-exit-codes.yaml")
UNRECOGNISED = 255  # OpenPAI: the user's command failed and its runtime could not tell why
UNDEFINED_POSITIVE = 256
UNDEFINED_NEGATIVE = -8000


@dataclass(frozen=True)
class OpenPAIExit:
    """How OpenPAI's exit spec names a failure: its code, phrase, type (``USER_FAILURE``,
    ``PLATFORM_FAILURE``, ...), stage, behavior and reaction."""

    code: int
    phrase: str
    type: str
    stage: str
    behavior: str
    reaction: str


@cache
def _openpai_table() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(OPENPAI_CODES_PATH.read_text())
    return loaded


def _openpai_code(rule_id: str | None, exit_code: int | None, lines: list[str]) -> int:
    if exit_code == 0 and rule_id is None:
        return 0
    mapping = _openpai_table()["rules"].get(rule_id or "") or {}
    if mapping.get("signal") and exit_code is not None:
        return exit_code  # OpenPAI's own code for the signal, else the number as it is
    quoted = lines[-1] if lines else ""
    for refined in mapping.get("byLine", []):
        if re.search(refined["pattern"], quoted):
            return int(refined["code"])
    return int(mapping.get("code", UNRECOGNISED))


def openpai_exit(
    rule_id: str | None, exit_code: int | None, lines: list[str] | None = None
) -> OpenPAIExit:
    """OpenPAI's code and type for the failure our rule ``rule_id`` explained (``explain``'s
    ``id``); an undefined code keeps its own number with OpenPAI's fallback's type, as
    OpenPAI's rest-server does."""
    code = _openpai_code(rule_id, exit_code, lines or [])
    codes = _openpai_table()["codes"]
    fallback = UNDEFINED_POSITIVE if code > 0 else UNDEFINED_NEGATIVE
    phrase, kind, stage, behavior, reaction = codes.get(code) or codes[fallback]
    return OpenPAIExit(code, phrase, kind, stage, behavior, reaction)


# OpenPAI's exit behaviors whose retries do not count against the retry limit: its framework
# controller's "fancy" retry policy retries a Transient failure without counting it.
TRANSIENT_BEHAVIORS = frozenset({"TRANSIENT", "TRANSIENT_CONFLICT"})
# Our rules for a task that lost its resources (its node, its place): OpenPAI counts them as
# the platform's; ``retryDetails.resource`` names them apart.
RESOURCE_RULES = frozenset({"lost", "node-lost", "evicted", "preempted", "out-of-resource"})


def is_accountable(found: OpenPAIExit) -> bool:
    """Whether a retry after this failure is one of OpenPAI's ``accountableRetries`` (its
    framework controller's ``accountableRetriedCount``): every failure but a transient one."""
    return found.behavior not in TRANSIENT_BEHAVIORS


def retry_cause(rule_id: str | None, found: OpenPAIExit) -> str:
    """Which ``retryDetails`` counter a retry after this failure goes to. ``user``: the
    accountable retries, as OpenPAI's rest-server counts them (``is_accountable``); the others
    are OpenPAI's ``platform`` retries, split here: ``resource`` when the task lost its
    resources (``RESOURCE_RULES``, or OpenPAI's ``RESOURCE_ALLOCATION_TIMEOUT``), else
    ``platform``."""
    if is_accountable(found):
        return "user"
    if rule_id in RESOURCE_RULES or found.type == "RESOURCE_ALLOCATION_TIMEOUT":
        return "resource"
    return "platform"


def spec_retry_cause(spec: dict[str, Any] | None) -> str:
    """``retry_cause`` of a task's stored exit spec (``Explanation.as_dict``); a failure
    without one is the user's, as OpenPAI counts a failure it cannot tell."""
    if not spec:
        return "user"
    rule_id = spec.get("id")
    return retry_cause(rule_id, openpai_exit(rule_id, spec.get("exit_code"), spec.get("lines")))
