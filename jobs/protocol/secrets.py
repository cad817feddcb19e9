"""Hide what a job marks as secret before it is shown or exported."""

from __future__ import annotations

import copy
from typing import Any

from jobs.protocol.references import REFERENCE

SECRET_MASK = "******"  # noqa: S105 - the mask, not a password


def mask_secrets(job: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of ``job`` with every ``secrets`` value replaced by ``SECRET_MASK``, and
    every prerequisite's literal ``auth.password`` (one that is not a ``<% %>`` reference)."""
    masked = copy.deepcopy(job)
    secrets = masked.get("secrets")
    if isinstance(secrets, dict):
        for key in secrets:
            secrets[key] = SECRET_MASK
    prereqs = masked.get("prerequisites")
    for prereq in prereqs if isinstance(prereqs, list) else []:
        auth = prereq.get("auth") if isinstance(prereq, dict) else None
        if isinstance(auth, dict) and "password" in auth:
            password = auth["password"]
            if not (isinstance(password, str) and REFERENCE.fullmatch(password.strip())):
                auth["password"] = SECRET_MASK
    return masked
