"""Celery tasks of the clusters app: thin wrappers."""

from __future__ import annotations

from celery import shared_task

from clusters import capacity
from clusters.registry import get_backend


@shared_task(name="clusters.tasks.refresh_capacity", ignore_result=True)
def refresh_capacity() -> int:
    """Refresh the cached node capacities; returns how many nodes the backend has."""
    return len(capacity.refresh(get_backend()))
