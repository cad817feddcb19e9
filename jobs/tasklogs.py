"""A task's log as people read it: the job page's tails, the log page and its download, and the
API's task logs all read through ``read_task_log``, which masks every secret of the job."""

from __future__ import annotations

from typing import TYPE_CHECKING

from clusters.registry import get_backend
from jobs.protocol import secret_masker

if TYPE_CHECKING:
    from clusters.backends.base import Backend
    from jobs.models import Job


def read_task_log(
    job: Job, ref: str, stream: str, tail: int | None = None, backend: Backend | None = None
) -> bytes:
    """The task's ``stream`` (its last ``tail`` bytes when given) with each secret value of
    ``job`` as ``******``, also one that the tail's first byte cuts in two."""
    mask = secret_masker(job.protocol)
    backend = backend or get_backend()
    if tail is None:
        return mask(backend.read_log(ref, stream))
    if tail == 0:
        return b""
    data = backend.read_log(ref, stream, tail + mask.margin)
    return mask(data, start=max(0, len(data) - tail))
