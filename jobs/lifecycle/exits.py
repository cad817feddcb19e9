"""What reconcile stores when it sees a task finish: the exit spec's explanation of it."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from backends.base import Backend
from jobs import exitspec
from jobs.models import Job
from jobs.states import TaskState
from protocol import SecretMasker, secret_masker

FINISHED = (TaskState.FAILED, TaskState.STOPPED)

# What a backend says of every exit ("exited with code 1", Kubernetes' "Error: ..."): the
# reason already gives the code, so only diagnostics that say more are kept after the phrase.
PLAIN_EXIT = re.compile(r"(?:Error: )?(?:exited with code \d+|killed by signal \d+ \(\w+\))")


def read_tail(backend: Backend, ref: str, mask: SecretMasker) -> str:
    """The last ~64 KB of the task's stderr then stdout, the job's secrets masked (also one
    that the cut splits), or nothing when the backend cannot say."""
    size = exitspec.LOG_TAIL_BYTES
    texts = []
    for stream in ("stderr", "stdout"):
        try:
            data = backend.read_log(ref, stream, size + mask.margin)
        except Exception:  # a log that cannot be read must not stop the reconcile pass
            data = b""
        texts.append(mask(data, start=max(0, len(data) - size)).decode("utf-8", "replace"))
    return "\n".join(texts)


QUOTING = ("diagnostics", "exit_spec")  # fields that may quote what a task printed


def maskers_of(changed: Iterable[tuple[Any, dict[str, Any]]]) -> dict[int, SecretMasker]:
    """The secret masker of each job whose task ``changed`` finishes or quotes its output
    (diagnostics), by job id: one query, one masker per job."""
    ids = {
        task.job_id
        for task, changes in changed
        if changes.get("state") in FINISHED or any(changes.get(f) for f in QUOTING)
    }
    if not ids:
        return {}
    rows = Job.objects.filter(id__in=ids).values_list("id", "protocol")
    return {job_id: secret_masker(protocol) for job_id, protocol in rows}


def mask_quoted(changes: dict[str, Any], masker: SecretMasker) -> None:
    """Mask the job's secrets in the diagnostics and exit spec about to be stored: they quote
    the task's log (a failing command may print a secret) and flow into the attempt's and the
    job's reason, the events, the pages, the API and the admin."""
    for name in QUOTING:
        if changes.get(name):
            changes[name] = masker.json(changes[name])


def exit_changes(
    backend: Backend, ref: str, changes: dict[str, Any], stopped: bool, masker: SecretMasker
) -> dict[str, Any]:
    """Extra fields for a task whose ``changes`` finish it: ``exit_spec``, and diagnostics
    that start with the phrase and quote the log line that matters (so the job's reason
    carries them)."""
    state = changes.get("state")
    if state not in FINISHED:
        return {}
    code = changes.get("exit_code")
    diagnostics = str(changes.get("diagnostics") or "")
    found = exitspec.explain(
        code if isinstance(code, int) else None,
        diagnostics,
        read_tail(backend, ref, masker) if ref else "",
        stopped=state == TaskState.STOPPED or stopped,
    )
    if found is None:
        return {}
    return {"exit_spec": found.as_dict(), "diagnostics": sentence(found, diagnostics)}


def sentence(found: exitspec.Explanation, diagnostics: str) -> str:
    """``Python exception ValueError — "ValueError: bad input"``: the phrase, the quoted log
    line, then what the backend said when it says more than the exit code."""
    text = found.phrase
    if found.quote:
        text += f' — "{found.quote}"'
    extra = diagnostics.strip()
    if extra and not PLAIN_EXIT.fullmatch(extra) and extra.lower() not in text.lower():
        text += f"; {extra}" if found.quote else f": {extra}"
    return text
