"""Beat runs the reconcile pass and the capacity refresh, whatever imported the app first; a
worker process keeps what it started with out of the garbage collector's full collections."""

from __future__ import annotations

import subprocess
import sys

from celery import Celery

# A worker's child as Celery's prefork pool starts it: the app imported, Django set up, then
# worker_process_init; in a process of its own, so that this one is not frozen.
CHILD = """
import gc, os
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
import django
django.setup()
from celery.signals import worker_process_init
import portal.celery
before = gc.get_freeze_count()
worker_process_init.send(sender=None)
print(before, gc.get_freeze_count())
"""


def test_finalizing_the_app_schedules_reconcile_and_capacity(settings) -> None:
    from portal.celery import schedule_reconcile

    app = Celery("probe", set_as_current=False)  # its tasks are not imported: by name only
    schedule_reconcile(sender=app)
    schedule = app.conf.beat_schedule
    assert schedule["reconcile"]["task"] == "jobs.tasks.reconcile"
    assert schedule["reconcile"]["schedule"] == settings.RECONCILE_INTERVAL_SECONDS
    assert schedule["refresh capacity"]["task"] == "clusters.tasks.refresh_capacity"


def test_a_worker_process_freezes_what_it_started_with() -> None:
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True)
    before, after = map(int, out.stdout.split())
    assert before == 0
    assert after > 10_000  # the modules, classes and setup of Django and Celery
