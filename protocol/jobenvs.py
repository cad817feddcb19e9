"""``jobEnvs`` (v1, and ``extras.jobEnvs`` in v2): which of its names a task gets. Seed 002 says
they are available in the task and may not replace the system's own variables, so names
starting ``PAI_`` or ``QIZHI_`` are skipped, as are names no shell can use; each such name is
a warning at submission."""

from __future__ import annotations

import re
from typing import Any

VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
RESERVED_PREFIXES = ("PAI_", "QIZHI_")


def why_skipped(name: str) -> str | None:
    """Why the ``jobEnvs`` entry ``name`` is not set in the tasks; None when it is."""
    if not VARIABLE.fullmatch(name):
        return "not a variable name; not set in the tasks"
    if name.startswith(RESERVED_PREFIXES):
        return (
            f"{'/'.join(p + '*' for p in RESERVED_PREFIXES)} names are the portal's own and "
            "may not be replaced; not set in the tasks"
        )
    return None


def job_env_warnings(job: dict[str, Any]) -> list[str]:
    """One warning for each ``jobEnvs`` name of the (normalised) job that tasks will not get."""
    extras = job.get("extras")
    extras = extras if isinstance(extras, dict) else {}
    v1 = extras.get("v1")
    sources = [("extras.jobEnvs", extras.get("jobEnvs"))]
    if isinstance(v1, dict):
        sources.append(("jobEnvs", v1.get("jobEnvs")))
    warnings = []
    for path, envs in sources:
        for name in envs if isinstance(envs, dict) else {}:
            reason = why_skipped(str(name))
            if reason:
                warnings.append(f"{path}.{name}: {reason}")
    return warnings
