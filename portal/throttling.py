"""Per-user (and per-address for anonymous calls) API rate limits, one counter per window.

DRF's own throttles keep every request's time in a list that is read, trimmed and written back
whole on each call: at 1,200 a minute that is a 1,200-item list per request. Here each window of
the rate (a minute for ``1200/minute``) has one counter in the cache, added and incremented
atomically: two small cache calls per request whatever the rate. A client may use its whole
allowance at the end of one window and again at the start of the next.
"""

from __future__ import annotations

import functools
import time
from typing import Any

from django.core.cache import BaseCache, caches
from django.core.signals import setting_changed
from django.dispatch import receiver
from rest_framework import throttling


@functools.cache
def shared_cache() -> BaseCache:
    """One cache client per process for the counters. ``django.core.cache.cache`` is local to
    each asyncio context, and under daphne every request runs in a context of its own: each
    request built a Redis client and opened a connection (a fifth of a submission's time)."""
    return caches.create_connection("default")


@receiver(setting_changed)
def _settings_changed(setting: str, **kwargs: Any) -> None:
    if setting == "CACHES":  # tests swap the cache
        shared_cache.cache_clear()


class WindowCounter(throttling.SimpleRateThrottle):
    """``allow_request`` and ``wait`` with one counter per window, for the classes below."""

    window_ends = 0.0

    @property
    def cache(self) -> BaseCache:  # type: ignore[override]
        return shared_cache()

    def allow_request(self, request: Any, view: Any) -> bool:
        if self.rate is None:
            return True
        key = self.get_cache_key(request, view)
        if key is None:
            return True
        self.now = self.timer()
        window = int(self.now // self.duration)
        self.window_ends = (window + 1) * self.duration
        key = f"{key}:{window}"
        self.cache.add(key, 0, self.duration + 1)
        try:
            count = self.cache.incr(key)
        except ValueError:  # it expired between the two calls: this request starts it again
            self.cache.add(key, 1, self.duration + 1)
            count = 1
        return count <= self.num_requests

    def wait(self) -> float:
        return max(self.window_ends - self.now, 1.0)

    def timer(self) -> float:
        return time.time()


class UserRateThrottle(WindowCounter, throttling.UserRateThrottle):
    """``API_RATE_USER`` per authenticated user (anonymous calls count by address)."""


class AnonRateThrottle(WindowCounter, throttling.AnonRateThrottle):
    """``API_RATE_ANON`` per address for calls without a user."""
