"""Run reconcile passes until something is true: the loop the beat process drives in production."""

from __future__ import annotations

import time
from collections.abc import Callable

from backends.base import Backend
from jobs.lifecycle.passes import run_pass
from jobs.models import Job, Task
from jobs.states import LIVE_TASK_STATES


def reconcile_until(backend: Backend, predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        run_pass(backend)
        if predicate():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s")
        time.sleep(0.1)


def settle(backend: Backend, job: Job, timeout: float = 30.0) -> Job:
    """Reconcile until ``job`` is final and every task of it has ended; return it fresh."""

    def done() -> bool:
        job.refresh_from_db()
        live = Task.objects.filter(attempt__job=job, state__in=LIVE_TASK_STATES)
        return job.is_final and not live.exists()

    reconcile_until(backend, done, timeout)
    return job


def env_of(text: str) -> dict[str, str]:
    """The variables a task printed with ``env``, one ``NAME=value`` a line."""
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
    return {name: value for name, value in pairs}
