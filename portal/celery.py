"""The Celery app: Redis broker, JSON only, settings from ``CELERY_*``."""

from __future__ import annotations

import gc
import logging
import os

from celery import Celery, Task
from celery.signals import task_postrun, task_prerun, worker_process_init
from django.conf import settings  # lazy: read when beat finalizes, after Django is set up
from django.db import close_old_connections

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Celery's Django fixup closes Django's connection pool before and after every task in a
# prefork worker (celery/celery#10554): each reconcile pass then opened a new PostgreSQL
# connection, and a server process with it (4-8 ms of a one-job pass here). Told to reuse
# connections it leaves them alone but once every 1,000 tasks (and still closes what a new
# child inherits); each task hands its connection back to the pool instead, as Django does
# around a request.
app.conf.CELERY_DB_REUSE_MAX = 1000


@task_prerun.connect
@task_postrun.connect
def return_connections(sender: Task, **kwargs: object) -> None:
    if not getattr(sender.request, "is_eager", False):  # in a caller's transaction: not ours
        close_old_connections()


@worker_process_init.connect
def freeze_startup_objects(**kwargs: object) -> None:
    """What a worker process has when it starts (modules, classes, Django's and Celery's
    setup) stays for its life: frozen, it is left out of the garbage collector's full
    collections, which then walk what the passes made. With about 130,000 such objects a
    full collection took 53-68 ms, and stalled one admission pass in about nine at 10,000
    waiting jobs; 13 ms frozen (``bench/admission.py``)."""
    gc.freeze()


# Beat's routine samplers and the alerts' sweep: their "received" and "succeeded" lines, two
# every 5 s, buried what make run prints worth reading. Their failures are still logged.
ROUTINE_TASKS = frozenset(
    {
        "jobs.tasks.sample_usage",
        "jobs.tasks.sample_vc_usage",
        "clusters.tasks.refresh_capacity",
        "notify.tasks.sweep",
    }
)


def not_routine(record: logging.LogRecord) -> bool:
    """False for the worker's INFO lines about a routine task: Celery passes the context of
    "received" and "succeeded" as ``extra={"data": ...}`` (for handlers like this one), the
    task's name first in the arguments of "Discarding revoked task" (one that expired)."""
    data = getattr(record, "data", None)
    if isinstance(data, dict):
        name = data.get("name")
    else:
        name = record.args[0] if isinstance(record.args, tuple) and record.args else None
    return not (name in ROUTINE_TASKS and record.levelno <= logging.INFO)


# "received"; "succeeded"; "Discarding revoked task" (expired while the worker was busy).
for _name in ("celery.worker.strategy", "celery.app.trace", "celery.worker.request"):
    logging.getLogger(_name).addFilter(not_routine)


@app.on_after_finalize.connect
def schedule_reconcile(sender: Celery, **kwargs: object) -> None:
    interval = settings.RECONCILE_INTERVAL_SECONDS
    # By name: the tasks' modules may not be imported yet when the app finalizes.
    # The safety net: a full pass. Ended tasks, submissions and stops wake the loop at once.
    full_pass = sender.signature("jobs.tasks.reconcile", kwargs={"full": True})
    sender.add_periodic_task(interval, full_pass, name="reconcile", expires=interval * 0.9)
    sender.add_periodic_task(
        60.0,
        sender.signature("clusters.tasks.refresh_capacity"),
        name="refresh capacity",
        expires=50.0,
    )
    sample = settings.USAGE_SAMPLE_SECONDS  # each running task's usage, for the job page
    sender.add_periodic_task(
        sample, sender.signature("jobs.tasks.sample_usage"), name="sample usage", expires=sample
    )
    # Each virtual cluster's use, for its chart against its guarantee (clusters.usage).
    sender.add_periodic_task(
        60.0,  # clusters.usage.SAMPLE_SECONDS
        sender.signature("jobs.tasks.sample_vc_usage"),
        name="sample virtual clusters' use",
        expires=50.0,
    )
    # Alerts (notify.sweep): unsent ones sent, long waits and the portal's alerts found.
    sweep = settings.NOTIFY_SWEEP_SECONDS
    sender.add_periodic_task(
        sweep, sender.signature("notify.tasks.sweep"), name="sweep alerts", expires=sweep * 0.9
    )
