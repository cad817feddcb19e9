"""What every page shows besides its own content."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest

from portal import scheduler_status as status


def scheduler_status(request: HttpRequest) -> dict[str, Any]:
    """``scheduler_late``: a sentence when the reconcile loop (Celery beat + a worker) has not
    completed a pass for ``SCHEDULER_LATE_SECONDS``, for signed-in users; and what their
    open page needs to ask again every ``SCHEDULER_CHECK_SECONDS`` (portal.scheduler_status)."""
    if not request.user.is_authenticated:
        return {}
    return {
        "scheduler_late": status.late_message(),
        "scheduler_ticket": status.ticket_for(request.user.pk),
        "scheduler_check_ms": int(settings.SCHEDULER_CHECK_SECONDS * 1000),
    }
