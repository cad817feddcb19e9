"""``extras.notify``: which of a job's ends its owner is told of, and how (the portal's own key;
OpenPAI lets ``extras`` hold anything). Checked at submit so that a typo is a 400 naming the
field instead of an alert that silently never comes; the ``notify`` app reads the result.

    extras:
      notify: {events: [failed, succeeded], email: true, webhook: false, waitingMinutes: 30}

Every key is optional: ``events`` replaces the owner's list of events for this job, ``email`` and
``webhook`` turn the owner's channels on or off for it, ``waitingMinutes`` replaces their
threshold for the "waited too long" alert.
"""

from __future__ import annotations

from typing import Any

from protocol.checks import unknown_keys, want_bool, want_dict, want_int, want_one_of
from protocol.errors import Issues

# What a job's owner may be told of; the names of ``events`` and of the user's own settings.
# (``events``, not ``on``: YAML 1.1 reads a bare ``on`` as the boolean true.)
JOB_EVENTS = ("succeeded", "failed", "stopped", "preempted", "waiting")
KEYS = ("events", "email", "webhook", "waitingMinutes")
MAX_WAITING_MINUTES = 60 * 24 * 365


def check_notify(issues: Issues, extras: dict[str, Any]) -> None:
    """An issue for each thing wrong in ``extras.notify`` (absent: nothing to check)."""
    if "notify" not in extras:
        return
    path = ("extras", "notify")
    notify = want_dict(issues, path, extras["notify"])
    if notify is None:
        return
    unknown_keys(issues, path, notify, KEYS)
    if "events" in notify:
        events = notify["events"]
        if not isinstance(events, list):
            issues.add((path, "events"), f"must be a list of events ({', '.join(JOB_EVENTS)})")
        else:
            for index, event in enumerate(events):
                want_one_of(issues, ((path, "events"), index), event, JOB_EVENTS)
    for key in ("email", "webhook"):
        if key in notify:
            want_bool(issues, (path, key), notify[key])
    if "waitingMinutes" in notify:
        minutes = want_int(issues, (path, "waitingMinutes"), notify["waitingMinutes"], 1)
        if minutes is not None and minutes > MAX_WAITING_MINUTES:
            issues.add((path, "waitingMinutes"), f"must be at most {MAX_WAITING_MINUTES}")
