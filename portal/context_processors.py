"""What every page shows besides its own content."""

from __future__ import annotations

import logging
from typing import Any

import redis
from django.conf import settings
from django.http import HttpRequest

from jobs.lifecycle.passes import seconds_since_last_pass

log = logging.getLogger(__name__)


def scheduler_status(request: HttpRequest) -> dict[str, Any]:
    """``scheduler_late``: a sentence when the reconcile loop (Celery beat + a worker) has not
    completed a pass for ``SCHEDULER_LATE_SECONDS``, for signed-in users; else nothing."""
    if not request.user.is_authenticated:
        return {}
    try:
        age = seconds_since_last_pass()
    except redis.exceptions.RedisError:
        return {}  # Redis down is said where it matters (the API's 503s), not guessed here
    if age is not None and age < settings.SCHEDULER_LATE_SECONDS:
        return {}
    since = "has not run yet" if age is None else f"has not run for {age:.0f} s"
    return {
        "scheduler_late": f"The scheduler {since}: jobs will not start or finish until the "
        "Celery worker and beat are back."
    }
