"""``manage.py watchcluster``: wake the reconcile loop the moment the cluster changes.

A long-running process beside the Celery worker: it follows the backend's watch
(``base.SupportsWatch``; on Kubernetes, a watch on the portal's pods) and asks for a reconcile
pass (``jobs.reconcile.request_pass``) for each batch of changes, so that a pod that starts,
ends or vanishes reaches its job at once instead of at the next periodic pass, which stays as
the safety net. Asking is cheap and coalesced (a queued pass is not queued twice), so a burst of
changes costs one pass or two. A backend without a watch (the local one) has nothing to follow:
the command says so and exits 0. It keeps nothing of its own: killed and started again, it lists
the pods again and asks for one pass, which reads the cluster as it is.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from django.core.management.base import BaseCommand

from clusters.backends.base import SupportsWatch
from clusters.registry import get_backend
from jobs.reconcile import request_pass

log = logging.getLogger(__name__)


def follow(
    backend: SupportsWatch,
    stop: threading.Event,
    wake: Callable[[], None] = request_pass,
) -> int:
    """Call ``wake`` for each batch of the backend's watch that holds changes, until ``stop``
    is set (seen when the next batch, or the watch's next bookmark, comes); the batches woken
    for."""
    woken = 0
    for changes in backend.watch(stop):
        if changes.observations or changes.resync:
            wake()
            woken += 1
        if stop.is_set():
            break
    return woken


class Command(BaseCommand):
    help = "Follow the cluster's changes and wake the reconcile loop for each (Kubernetes)."

    def handle(self, *args: Any, **options: Any) -> None:
        backend = get_backend()
        if not isinstance(backend, SupportsWatch):
            self.stdout.write(f"the {backend.name} backend has no watch: nothing to follow.")
            return
        self.stdout.write(f"following the {backend.name} backend's changes.")
        follow(backend, threading.Event())
