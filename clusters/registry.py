"""The backend this portal runs jobs on, built once from settings."""

from __future__ import annotations

from functools import cache

from django.conf import settings

from clusters.backends.base import Backend


@cache
def get_backend() -> Backend:
    if settings.CLUSTER_BACKEND == "local":
        from clusters.backends.local import LocalBackend

        return LocalBackend(
            settings.LOCAL_TASK_ROOT,
            host_ip=settings.LOCAL_TASK_IP,
            stop_grace_seconds=settings.LOCAL_STOP_GRACE_SECONDS,
        )
    raise ValueError(f"CLUSTER_BACKEND: unknown backend {settings.CLUSTER_BACKEND!r}")
