"""What reconcile stores when it sees a task finish: the exit spec's explanation of it."""

from __future__ import annotations

from typing import Any

from clusters.backends.base import Backend
from jobs import exitspec
from jobs.states import TaskState

FINISHED = (TaskState.FAILED, TaskState.STOPPED)


def read_tail(backend: Backend, ref: str) -> str:
    """The last ~64 KB of the task's stderr then stdout (nothing when the backend cannot say)."""
    texts = []
    for stream in ("stderr", "stdout"):
        try:
            data = backend.read_log(ref, stream, exitspec.LOG_TAIL_BYTES)
        except Exception:  # a log that cannot be read must not stop the reconcile pass
            data = b""
        texts.append(data.decode("utf-8", "replace"))
    return "\n".join(texts)


def exit_changes(
    backend: Backend, ref: str, changes: dict[str, Any], stopped: bool
) -> dict[str, Any]:
    """Extra fields for a task whose ``changes`` finish it: ``exit_spec``, and diagnostics
    that start with the phrase (so the job's reason carries it)."""
    state = changes.get("state")
    if state not in FINISHED:
        return {}
    code = changes.get("exit_code")
    diagnostics = str(changes.get("diagnostics") or "")
    found = exitspec.explain(
        code if isinstance(code, int) else None,
        diagnostics,
        read_tail(backend, ref) if ref else "",
        stopped=state == TaskState.STOPPED or stopped,
    )
    if found is None:
        return {}
    text = found.phrase if not diagnostics else f"{found.phrase}: {diagnostics}"
    return {"exit_spec": found.as_dict(), "diagnostics": text}
