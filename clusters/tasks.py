"""Celery tasks of the clusters app: thin wrappers."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from clusters import capacity, usage
from clusters.registry import get_backend


@shared_task(name="clusters.tasks.refresh_capacity", ignore_result=True)
def refresh_capacity() -> int:
    """Refresh the cached node capacities; returns how many nodes the backend has."""
    return len(capacity.refresh(get_backend()))


@shared_task(name="clusters.tasks.sample_vc_usage", ignore_result=True)
def sample_vc_usage() -> int:
    """Record every virtual cluster's use now, then thin and expire old samples
    (``clusters.usage``); returns how many samples it recorded."""
    now = timezone.now()
    recorded = usage.record(now)
    usage.prune(now)
    return recorded
