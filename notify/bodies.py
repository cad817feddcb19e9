"""What an alert says: the JSON a webhook receives (and signs), its e-mail subject and text.
Built when the event happens, so that a try an hour later says what happened then."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from jobs.models import Job

SUBJECT_PREFIX = "[GPU portal]"
PHRASES = {
    "succeeded": "succeeded",
    "failed": "failed",
    "stopped": "was stopped",
    "preempted": "was preempted and waits again",
    "waiting": "has waited too long",
}


def job_url(username: str, name: str) -> str:
    path = reverse("jobs:detail", kwargs={"username": username, "name": name})
    return settings.PORTAL_URL + path


def iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def job_body(job: Job, event: str, now: datetime | None = None) -> tuple[str, str]:
    """The subject and the JSON body of a job's ``event`` (one of ``JOB_EVENTS``)."""
    owner = job.owner.get_username()
    full = f"{owner}~{job.name}"
    summary = f"job {full} {PHRASES[event]}"
    if job.reason:
        summary += f": {job.reason}"
    payload = {
        "event": f"job.{event}",
        "time": iso(now or timezone.now()),
        "message": summary,
        "job": {
            "name": full,
            "username": owner,
            "jobName": job.name,
            "virtualCluster": job.virtual_cluster.name,
            "state": job.state,
            "reason": job.reason,
            "exitCode": job.exit_code,
            "retries": job.retries,
            "createdTime": iso(job.created_at),
            "completedTime": iso(job.completed_at),
            "url": job_url(owner, job.name),
        },
    }
    return subject(summary), dump(payload)


def alert_body(alert: dict[str, Any], now: datetime | None = None) -> tuple[str, str]:
    """The subject and JSON body of a portal alert (one of ``jobs.alerts``'s)."""
    labels = alert["labels"]
    summary = f"{labels['alertname']}: {alert['annotations']['summary']}"
    owner, _, name = str(labels.get("job_name", "")).partition("~")
    url = job_url(owner, name) if name else settings.PORTAL_URL + reverse("cluster:page")
    payload = {
        "event": "alert",
        "time": iso(now or timezone.now()),
        "message": summary,
        "alert": {
            "name": labels["alertname"],
            "severity": labels.get("severity", ""),
            "summary": alert["annotations"]["summary"],
            "labels": labels,
            "startsAt": alert["startsAt"],
            "url": url,
        },
    }
    return subject(summary), dump(payload)


def probe_body(username: str) -> tuple[str, str]:
    summary = f"a test alert for {username}: alerts reach you here"
    payload = {"event": "test", "time": iso(timezone.now()), "message": summary}
    return subject(summary), dump(payload)


def subject(summary: str) -> str:
    line = " ".join(f"{SUBJECT_PREFIX} {summary}".split())  # one line: no header injection
    return line if len(line) <= 200 else line[:199] + "…"


def dump(payload: dict[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def text_of(body: str) -> str:
    """The e-mail's text: the message, then each detail on a line, then the link."""
    payload = json.loads(body)
    lines = [payload["message"], ""]
    details = payload.get("job") or payload.get("alert") or {}
    for key in ("state", "reason", "exitCode", "virtualCluster", "severity", "startsAt"):
        if details.get(key) not in (None, ""):
            lines.append(f"{key}: {details[key]}")
    if details.get("url"):
        lines += ["", details["url"]]
    lines += ["", f"(event {payload['event']} at {payload['time']})"]
    return "\n".join(lines) + "\n"
