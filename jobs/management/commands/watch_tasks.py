"""``manage.py watch_tasks``: wake the reconcile loop as soon as a local task ends.

Runs beside the worker (``runportal`` starts it, and starts it again should it die; compose
runs it as the ``watcher`` service). It records each ended task as changed (``jobs.wakeup``)
and asks for a pass, so that the task's end is applied within milliseconds instead of at
beat's next safety-net pass. On another backend there is nothing to watch: it waits for its
stop signal, so that a supervisor does not restart it in a loop.
"""

from __future__ import annotations

import signal
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from clusters.backends.localwatch import listen
from jobs import wakeup


class Command(BaseCommand):
    help = "Wake the reconcile loop whenever a task of the local backend ends."

    def handle(self, *args: Any, **options: Any) -> None:
        if settings.CLUSTER_BACKEND != "local":
            self.stdout.write(f"nothing to watch on the {settings.CLUSTER_BACKEND} backend")
            signal.pause()
            return
        self.stdout.write(f"watching {settings.LOCAL_TASK_ROOT} for ended tasks")
        listen(settings.LOCAL_TASK_ROOT, wakeup.tasks_changed)
