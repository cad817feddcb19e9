"""What the job page says about the runtime plugins of a job."""

from __future__ import annotations

from django.conf import settings

from jobs import plugins
from jobs.models import Job


def runtime_notes(job: Job) -> dict[str, object]:
    return {
        "is_debug": plugins.is_debug(job.protocol),
        "debug_keep_hours": settings.DEBUG_KEEP_HOURS,
    }
