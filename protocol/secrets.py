"""Hide what a job marks as secret before it is shown or exported."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Iterator
from typing import Any

from protocol.references import REFERENCE

SECRET_MASK = "******"  # noqa: S105 - the mask, not a password
# The auth fields shown as written; any other (password, and the keys OpenPAI's schema lets a
# registry's auth carry, such as a token) is a secret when it is a literal.
PUBLIC_AUTH_KEYS = frozenset({"username", "registryuri"})


def _literal_auth_secrets(auth: object) -> list[str]:
    """The keys of ``auth`` whose value is a secret given in clear (not a ``<% %>`` reference)."""
    if not isinstance(auth, dict):
        return []
    return [
        key
        for key, value in auth.items()
        if key not in PUBLIC_AUTH_KEYS
        and value is not None
        and not (isinstance(value, str) and REFERENCE.fullmatch(value.strip()))
    ]


def mask_secrets(job: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of ``job`` with every ``secrets`` value replaced by ``SECRET_MASK``, and
    every prerequisite's literal ``auth.password`` (one that is not a ``<% %>`` reference),
    as every other auth field but ``username`` and ``registryuri``."""
    masked: dict[str, Any] = _copy(job)
    secrets = masked.get("secrets")
    if isinstance(secrets, dict):
        for key in secrets:
            secrets[key] = SECRET_MASK
    prereqs = masked.get("prerequisites")
    for prereq in prereqs if isinstance(prereqs, list) else []:
        auth = prereq.get("auth") if isinstance(prereq, dict) else None
        for key in _literal_auth_secrets(auth):
            auth[key] = SECRET_MASK  # type: ignore[index]
    return masked


def masks_left(job: dict[str, Any]) -> list[str]:
    """The paths of the secret values that are still ``SECRET_MASK``: a cloned or exported
    job submitted without entering its secrets again."""
    secrets = job.get("secrets")
    paths = [
        f"secrets.{key}"
        for key, value in (secrets.items() if isinstance(secrets, dict) else [])
        if value == SECRET_MASK
    ]
    prereqs = job.get("prerequisites")
    for index, prereq in enumerate(prereqs if isinstance(prereqs, list) else []):
        auth = prereq.get("auth") if isinstance(prereq, dict) else None
        for key, value in auth.items() if isinstance(auth, dict) else []:
            if key not in PUBLIC_AUTH_KEYS and value == SECRET_MASK:
                paths.append(f"prerequisites[{index}].auth.{key}")
    return paths


MIN_SECRET_CHARS = 4  # shorter values ("1", "yes") would mask half of every log


class SecretMasker:
    """Replaces every secret value of a job by ``SECRET_MASK`` in text read back from a task
    (its logs): built once per read by ``secret_masker``, called on the bytes."""

    def __init__(self, values: set[str]) -> None:
        encoded = sorted({v.encode() for v in values}, key=len, reverse=True)
        self.pattern = re.compile(b"|".join(re.escape(v) for v in encoded)) if encoded else None
        # How many bytes before a tail window may hold the start of a secret that reaches it.
        self.margin = max((len(v) for v in encoded), default=0)

    def __call__(self, data: bytes, start: int = 0) -> bytes:
        """``data[start:]`` masked, where a secret that begins before ``start`` and reaches past
        it is masked whole: read ``margin`` bytes more than the tail you show, and pass where
        the tail begins, so that a secret the cut splits is not shown in part."""
        if self.pattern is None:
            return data[start:]
        pieces: list[bytes] = []
        position = start
        for match in self.pattern.finditer(data):
            if match.end() <= start:
                continue
            if match.start() > position:
                pieces.append(data[position : match.start()])
            pieces.append(SECRET_MASK.encode())
            position = match.end()
        pieces.append(data[position:])
        return b"".join(pieces)

    def chunks(self, parts: Iterable[bytes]) -> Iterator[bytes]:
        """``self(b"".join(parts))``, chunk by chunk, holding back at most the bytes a secret
        cut by a chunk's end may still need (``margin`` - 1, or up to the end of a secret
        that starts before them): a secret split across chunks is masked whole."""
        if self.pattern is None:
            yield from parts
            return
        keep = self.margin - 1
        carry = b""
        for part in parts:
            data = carry + part
            cut = len(data) - keep  # every secret starting before here ends inside data
            if cut <= 0:
                carry = data
                continue
            for match in self.pattern.finditer(data):
                if match.start() >= cut:
                    break
                cut = max(cut, match.end())  # never cut a secret in two
            carry = data[cut:]
            masked = self(data[:cut])
            if masked:
                yield masked
        if carry:
            yield self(carry)

    def text(self, value: str) -> str:
        """``value`` masked: text that quotes a task's output (diagnostics, reasons)."""
        if self.pattern is None:
            return value
        return self(value.encode("utf-8", "surrogatepass")).decode("utf-8", "surrogatepass")

    def json(self, value: Any, depth: int = 0) -> Any:
        """A copy of JSON data (the exit spec's explanation) with every string masked."""
        if isinstance(value, str):
            return self.text(value)
        if depth < 100 and isinstance(value, dict):
            return {key: self.json(item, depth + 1) for key, item in value.items()}
        if depth < 100 and isinstance(value, list):
            return [self.json(item, depth + 1) for item in value]
        return value


def secret_masker(job: dict[str, Any]) -> SecretMasker:
    """The masker of a job's secrets: every string (or number) of at least
    ``MIN_SECRET_CHARS`` characters in ``secrets``, however deeply nested, and each
    prerequisite's literal ``auth.password`` (and other secret auth fields)."""
    values = set(_leaves(job.get("secrets")))
    prereqs = job.get("prerequisites")
    for prereq in prereqs if isinstance(prereqs, list) else []:
        auth = prereq.get("auth") if isinstance(prereq, dict) else None
        for key in _literal_auth_secrets(auth):
            values.update(_leaves(auth[key]))  # type: ignore[index]
    return SecretMasker({v for v in values if len(v) >= MIN_SECRET_CHARS})


def _leaves(value: Any, depth: int = 0) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield str(value)
    elif depth < 100 and isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item, depth + 1)
    elif depth < 100 and isinstance(value, list):
        for item in value:
            yield from _leaves(item, depth + 1)


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
