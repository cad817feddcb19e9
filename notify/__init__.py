"""Alerts: e-mail and signed webhooks to a job's owner when the job ends, fails, is stopped,
is preempted or has waited too long, and the portal's own alerts (``jobs.alerts``) to admins.

The app listens to the job's event log (``jobs.models.JobEvent``): jobs knows nothing of it
(an import-linter contract). Each event becomes one row per channel in an outbox table
(``Notification``) whose unique key makes the same event never a second row; the Celery
worker delivers a row after the transaction commits, claiming it with a compare-and-swap so
that two workers never send it twice, and tries again with a backoff when the receiver is
down. Beat's sweep sends what was left unsent and finds long waits and the portal's alerts.

    models.py        the user's settings, the outbox (Notification), the portal alerts seen
    choose.py        who is told of what, by which channel (settings, the job's extras.notify)
    signals.py       the job's events (JobEvent) turned into rows by job_alerts.py
    job_alerts.py    a job's end, preemption and long wait; portal_alerts.py: the admins'
    bodies.py        what an alert says (the JSON, the e-mail's subject and text)
    outbox.py        rows added once, their delivery queued after commit
    delivery.py      one row delivered: claim, send, record, back off
    mail.py webhook.py addresses.py   the channels; where a webhook may connect
    sweep.py tasks.py                 beat's sweep; the Celery tasks
    options.py api.py forms.py views.py probe.py   the settings page and API, a test alert
"""
