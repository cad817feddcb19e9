"""Beat runs the alerts' sweep every NOTIFY_SWEEP_SECONDS, whatever imported the app first."""

from __future__ import annotations

from celery import Celery

from portal.celery import schedule_reconcile


def test_beat_sweeps_the_alerts(settings) -> None:
    settings.NOTIFY_SWEEP_SECONDS = 42.0
    app = Celery("probe", set_as_current=False)
    schedule_reconcile(sender=app)
    entry = app.conf.beat_schedule["sweep alerts"]
    assert entry["task"] == "notify.tasks.sweep"
    assert entry["schedule"] == 42.0
    assert entry["options"]["expires"] < 42.0
