"""``load_job`` / ``normalise``: from text or parsed data to the canonical v2 job."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from protocol.characters import check_characters, may_hold_unstorable
from protocol.errors import Issues, ProtocolError, show
from protocol.jobenvs import job_env_warnings
from protocol.parse import MAX_JOB_BYTES, parse_text
from protocol.plain_json import to_plain
from protocol.v1 import convert_v1, looks_like_v1
from protocol.v2 import check_v2

INTERNAL = "internal error while checking the job"


@dataclass(frozen=True)
class LoadedJob:
    """A checked job: ``job`` is the canonical v2 dict (JSON-serialisable)."""

    job: dict[str, Any]
    source_format: str  # "v2" or "v1"
    warnings: list[str] = field(default_factory=list)


def load_job(text: str | bytes, max_bytes: int = MAX_JOB_BYTES) -> LoadedJob:
    """Parse and check a job file (v1 JSON, v2 YAML or v2 JSON) of at most ``max_bytes``;
    raises ProtocolError only."""
    try:
        document, _ = parse_text(text, max_bytes)
        return _normalise(document, may_hold_unstorable(text))
    except ProtocolError:
        raise
    except RecursionError:
        raise ProtocolError.single("", "the job is nested too deeply") from None
    except Exception as exc:  # the contract is ProtocolError only; say what went wrong
        raise ProtocolError.single("", f"{INTERNAL} ({type(exc).__name__})") from exc


def normalise(document: object) -> LoadedJob:
    """Check an already-parsed job (a dict); raises ProtocolError only."""
    try:
        return _normalise(document)
    except ProtocolError:
        raise
    except RecursionError:
        raise ProtocolError.single("", "the job is nested too deeply") from None
    except Exception as exc:
        raise ProtocolError.single("", f"{INTERNAL} ({type(exc).__name__})") from exc


def refuse_unstorable(document: object) -> None:
    """A ProtocolError naming every string with a NUL or a lone surrogate, before any other
    check could quote one in a message (which could not be sent either)."""
    issues = Issues()
    check_characters(document, issues)
    issues.raise_if_any()


def _normalise(document: object, unstorable: bool = True) -> LoadedJob:
    """``unstorable``: whether the document may hold a NUL or a lone surrogate."""
    issues = Issues()
    doc, sources = to_plain(document, issues)  # bounded, without cycles, from here on
    issues.raise_if_any()
    if unstorable:
        refuse_unstorable(doc)
    if not isinstance(doc, dict):
        raise ProtocolError.single(
            "", f"a job must be an object (a mapping of fields), got {show(doc)}"
        )
    warnings: list[str] = []
    if looks_like_v1(doc):
        converted = convert_v1(issues, doc, warnings)
        issues.raise_if_any()
        job = check_v2(issues, converted, {})
        source_format = "v1"
    else:
        job = check_v2(issues, doc, sources)
        source_format = "v2"
    issues.raise_if_any()
    warnings += job_env_warnings(job)
    return LoadedJob(job=job, source_format=source_format, warnings=warnings)
