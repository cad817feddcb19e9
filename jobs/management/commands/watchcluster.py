"""``manage.py watchcluster``: wake the reconcile loop the moment the cluster changes.

A long-running process beside the Celery worker (``runportal`` starts it and starts it again
should it die; compose and the Kubernetes manifests run it as ``watcher``). It records the tasks
that changed (``jobs.wakeup.tasks_changed``) and asks for a pass, so that a task's end reaches
its job at once instead of at beat's next pass, which stays as the safety net:

every backend with a watch (``base.SupportsWatch``), each batch it gives:

- local: the tasks that ended (each task's wrapper leaves a file once its exit code is written;
  inotify wakes ``backends.ended``);
- Kubernetes: a watch on the portal's pods; after a relist (``resync``) a pass looks at
  everything.

A batch whose wake-up fails (Redis down) is tried again until it goes through: the local
backend deletes a batch's files only then.

It keeps nothing of its own: killed and started again, it reads the ended files or lists the
pods again, and the pass reads the cluster as it is.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from django.core.management.base import BaseCommand

from backends.base import SupportsWatch, WatchedChanges
from clusters.registry import get_backend
from jobs import wakeup

log = logging.getLogger(__name__)
RETRY_SECONDS = 1.0  # after a wake-up failed (e.g. Redis down), it is tried again


def wake_for(changes: WatchedChanges) -> None:
    """The changed tasks for the next pass to observe; after a relist, a pass over all."""
    if changes.resync:
        wakeup.request_full_pass()
    else:
        wakeup.tasks_changed(changes.observations)


def follow(
    backend: SupportsWatch,
    stop: threading.Event,
    wake: Callable[[WatchedChanges], None] = wake_for,
) -> int:
    """Call ``wake`` for each batch of the backend's watch that holds changes, until ``stop``
    is set (seen when the next batch, or the watch's next bookmark, comes); the batches woken
    for."""
    woken = 0
    for changes in backend.watch(stop):
        if changes.observations or changes.resync:
            while not delivered(wake, changes) and not stop.wait(RETRY_SECONDS):
                pass
            woken += 1
        if stop.is_set():
            break
    return woken


def delivered(wake: Callable[[WatchedChanges], None], changes: WatchedChanges) -> bool:
    try:
        wake(changes)
    except Exception:
        log.exception("could not wake the reconcile loop; trying again")
        return False
    return True


class Command(BaseCommand):
    help = "Follow the cluster's changes and wake the reconcile loop for each."

    def handle(self, *args: Any, **options: Any) -> None:
        backend = get_backend()
        if isinstance(backend, SupportsWatch):
            self.stdout.write(f"following the {backend.name} backend's changes.")
            follow(backend, threading.Event())
        else:
            self.stdout.write(f"the {backend.name} backend has no watch: nothing to follow.")
