"""A clone's text as its owner wrote it: comments, order and layout kept, with the new name and
every secret masked (issue 28: clone rewrote a pasted job as normalised YAML).

Text is edited as text (the top-level name's line, each secret value where it is written) and
then proved: the edited text must load to exactly the job the normalised clone would be. When
it does not (a secret written in a way the edit misses, a name in flow style, a deployment
chosen at submit), the caller falls back to the normalised YAML, which is always right.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.conf import settings

from protocol import SECRET_MASK, ProtocolError, load_job, mask_secrets
from protocol.secrets import MIN_SECRET_CHARS

QUOTED_MASK = f"'{SECRET_MASK}'"  # a bare ****** would be a YAML alias


def clone_text(submitted: str, protocol: dict[str, Any], new_name: str) -> str | None:
    """``submitted`` renamed to ``new_name`` with its secrets masked, or None when the edit
    cannot be proved to give the normalised clone (``mask_secrets(protocol)`` renamed)."""
    renamed = _renamed(submitted, new_name)
    if renamed is None:
        return None
    values = _secret_values(protocol)
    if any(len(value) < MIN_SECRET_CHARS for value in values):
        return None  # "abc" in a comment or a word could not be told from the secret
    text = _masked(renamed, values)
    if any(value in text for value in values):
        return None  # still there (in a longer word, a comment): never shown
    expected = mask_secrets(protocol)
    expected["name"] = new_name
    try:
        loaded = load_job(text, max_bytes=settings.JOB_MAX_BYTES).job
    except ProtocolError:
        return None
    return text if _same(loaded, expected) else None


def _renamed(text: str, new_name: str) -> str | None:
    """The job's own name replaced where it is written: YAML's one top-level ``name:`` line,
    or a JSON file's one ``"name"`` / v1 ``"jobName"`` member."""
    yaml_names = re.findall(r"(?m)^name[ \t]*:.*$", text)
    if len(yaml_names) == 1:
        return re.sub(r"(?m)^name[ \t]*:.*$", f"name: {new_name}", text, count=1)
    for key in ("jobName", "name"):
        pattern = rf'"{key}"\s*:\s*"(?:[^"\\]|\\.)*"'
        if len(re.findall(pattern, text)) == 1:
            return re.sub(pattern, f'"{key}": {json.dumps(new_name)}', text, count=1)
    return None


def _secret_values(protocol: dict[str, Any]) -> list[str]:
    """The values ``mask_secrets`` hides, as text, longest first."""
    masked = mask_secrets(protocol)
    values: set[str] = set()
    _differing(protocol, masked, values)
    return sorted(values, key=len, reverse=True)


def _differing(original: Any, masked: Any, found: set[str]) -> None:
    if isinstance(original, dict) and isinstance(masked, dict):
        for key, value in original.items():
            _differing(value, masked.get(key), found)
    elif isinstance(original, list) and isinstance(masked, list):
        for value, other in zip(original, masked, strict=False):
            _differing(value, other, found)
    elif masked == SECRET_MASK and original not in (SECRET_MASK, None):
        if isinstance(original, dict | list):
            return  # a whole structure masked: the loaded text will differ, and fall back
        found.add(json.dumps(original) if isinstance(original, bool) else str(original))


def _masked(text: str, values: list[str]) -> str:
    for value in values:
        text = text.replace(f"'{value}'", QUOTED_MASK).replace(f'"{value}"', f'"{SECRET_MASK}"')
        text = re.sub(rf"(?<![\w-]){re.escape(value)}(?![\w-])", QUOTED_MASK, text)
    return text


def _same(loaded: dict[str, Any], expected: dict[str, Any]) -> bool:
    """Equal but for the empty ``defaults`` submit adds to every job it stores."""
    loaded, expected = dict(loaded), dict(expected)
    for job in (loaded, expected):
        if job.get("defaults") == {}:
            del job["defaults"]
    return loaded == expected
