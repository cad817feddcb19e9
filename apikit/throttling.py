"""Per-user (and per-address for anonymous calls) API rate limits: DRF's own throttles, which
fail open while the cache (Redis) cannot be reached.

A read must not fail because a counter cannot be kept: requests are let through until the
cache answers again, and a warning is logged once per ``WARN_EVERY_SECONDS``, not per call.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from typing import Any

from django.core.cache import BaseCache, caches
from django.core.signals import setting_changed
from django.dispatch import receiver
from redis.exceptions import RedisError
from rest_framework import throttling

log = logging.getLogger(__name__)
WARN_EVERY_SECONDS = 60.0


class _OnceInAWhile:
    """Says yes at most once per ``seconds`` (for a warning that would otherwise repeat)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.next_at = 0.0
        self.lock = threading.Lock()

    def due(self) -> bool:
        with self.lock:
            now = time.monotonic()
            if now < self.next_at:
                return False
            self.next_at = now + self.seconds
            return True


_warn_unavailable = _OnceInAWhile(WARN_EVERY_SECONDS)


@functools.cache
def shared_cache() -> BaseCache:
    """One cache client per process for the request histories. Django's ``caches`` gives each
    asyncio context a client of its own, and under ASGI each request runs in one: each request
    built a Redis client and opened a connection (a fifth of a submission's time)."""
    return caches.create_connection("default")


@receiver(setting_changed)
def _cache_changed(setting: str, **kwargs: Any) -> None:
    if setting == "CACHES":  # the tests give each test a key prefix of its own
        shared_cache.cache_clear()


class FailOpen(throttling.SimpleRateThrottle):
    """A throttle on the shared cache that allows the request when the cache cannot be reached
    (DRF's way to choose a throttle's cache: its ``cache`` attribute)."""

    @property
    def cache(self) -> BaseCache:  # type: ignore[override]
        return shared_cache()

    def allow_request(self, request: Any, view: Any) -> bool:
        try:
            return super().allow_request(request, view)
        except (RedisError, OSError) as exc:
            if _warn_unavailable.due():
                log.warning(
                    "API rate limits are not enforced: the cache is unreachable (%s); "
                    "requests are let through until it answers (said at most every %.0f s)",
                    exc,
                    WARN_EVERY_SECONDS,
                )
            return True


class UserRateThrottle(FailOpen, throttling.UserRateThrottle):
    """``API_RATE_USER`` per authenticated user (anonymous calls count by address)."""


class AnonRateThrottle(FailOpen, throttling.AnonRateThrottle):
    """``API_RATE_ANON`` per address for calls without a user."""
