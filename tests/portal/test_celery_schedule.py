"""Beat runs the reconcile pass and the capacity refresh, whatever imported the app first."""

from __future__ import annotations

from celery import Celery


def test_finalizing_the_app_schedules_reconcile_and_capacity(settings) -> None:
    from portal.celery import schedule_reconcile

    app = Celery("probe", set_as_current=False)  # its tasks are not imported: by name only
    schedule_reconcile(sender=app)
    schedule = app.conf.beat_schedule
    assert schedule["reconcile"]["task"] == "jobs.tasks.reconcile"
    assert schedule["reconcile"]["schedule"] == settings.RECONCILE_INTERVAL_SECONDS
    assert schedule["refresh capacity"]["task"] == "clusters.tasks.refresh_capacity"
