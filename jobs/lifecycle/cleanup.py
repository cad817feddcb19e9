"""Cleanup: what the backend still holds of attempts nobody needs any more."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.core.cache import cache
from django.db.models import Q
from django.utils import timezone

from backends.base import Backend, SupportsCleanup
from jobs import usage
from jobs.models import JobAttempt, Task
from jobs.states import LIVE_TASK_STATES, JobState

log = logging.getLogger(__name__)
CLEANUP_KEY = "portal:reconcile:cleanup"  # in the cache while the last cleanup is recent
CLEANUP_EVERY_SECONDS = 300


def cleanup(backend: Backend, force: bool = False) -> list[str] | None:
    """At most every ``CLEANUP_EVERY_SECONDS`` (tracked in the cache; ``force`` skips that), ask
    a backend that can (``SupportsCleanup``) to delete what it holds of attempts that are neither
    running nor finished less than ``<BACKEND>_KEEP_FINISHED_HOURS`` ago (so recent logs stay
    readable); attempts of unknown jobs go too. The attempt keys it cleaned, or None when it did
    not run. A failing cleanup is logged and tried again next time, never failing the pass."""
    try:
        if not force and not cache.add(
            CLEANUP_KEY, timezone.now().isoformat(), CLEANUP_EVERY_SECONDS
        ):
            return None
        usage.forget()  # the usage samples of jobs ended past USAGE_RETENTION_DAYS
        if not isinstance(backend, SupportsCleanup):
            return None
        removed = backend.cleanup(kept_attempt_keys(keep_finished_hours(backend)))
    except Exception:
        log.exception("cleanup of finished attempts failed; the next one tries again")
        return None
    if removed:
        log.info("cleaned up %d attempt(s): %s", len(removed), ", ".join(removed[:20]))
    return removed


def keep_finished_hours(backend: Backend) -> float:
    if backend.name == "kubernetes":
        return float(settings.K8S_KEEP_FINISHED_HOURS)
    if backend.name == "slurm":
        return float(settings.SLURM_KEEP_FINISHED_HOURS)
    return float(settings.LOCAL_KEEP_FINISHED_HOURS)


def kept_attempt_keys(hours: float) -> set[str]:
    """Keys of attempts running, with a live task, or finished less than ``hours`` ago."""
    cutoff = timezone.now() - timedelta(hours=hours)
    live_tasks = Task.objects.filter(state__in=LIVE_TASK_STATES).values("attempt_id")
    return set(
        JobAttempt.objects.filter(
            Q(state=JobState.RUNNING)
            | Q(completed_at__isnull=True)
            | Q(completed_at__gte=cutoff)
            | Q(id__in=live_tasks)
        ).values_list("key", flat=True)
    )
