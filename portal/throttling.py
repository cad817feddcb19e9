"""Per-user (and per-address for anonymous calls) API rate limits, one counter per window.

DRF's own throttles keep every request's time in a list that is read, trimmed and written back
whole on each call: at 1,200 a minute that is a 1,200-item list per request. Here each window of
the rate (a minute for ``1200/minute``) has one counter in the cache, incremented atomically: on
Redis one script call per request (Django's ``add`` and ``incr`` make three round trips, a
sixth of a submission's time), on other caches ``add`` then ``incr``. A client may use its whole
allowance at the end of one window and again at the start of the next.

Without Redis the limit fails open: requests are let through (a read must not fail because a
counter cannot be kept), and a warning is logged once per ``WARN_EVERY_SECONDS``, not per call.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from typing import Any

from django.core.cache import BaseCache, caches
from django.core.cache.backends.redis import RedisCache
from django.core.signals import setting_changed
from django.dispatch import receiver
from redis.exceptions import RedisError
from rest_framework import throttling

log = logging.getLogger(__name__)
WARN_EVERY_SECONDS = 60.0


@functools.cache
def shared_cache() -> BaseCache:
    """One cache client per process for the counters. ``django.core.cache.cache`` is local to
    each asyncio context, and under daphne every request runs in a context of its own: each
    request built a Redis client and opened a connection (a fifth of a submission's time)."""
    return caches.create_connection("default")


# Adds one to a window's counter, giving it its time to live when it is new; returns the count.
_COUNT = """local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return count"""


@functools.cache
def _count_script() -> Any:
    """``_COUNT`` on the shared cache's Redis (one client per process), or None on another
    cache."""
    cache = shared_cache()
    if not isinstance(cache, RedisCache):
        return None
    # Django's RedisCache has no public way to its redis-py client: _cache is its client wrapper.
    return cache._cache.get_client(write=True).register_script(_COUNT)


def count(key: str, seconds: int) -> int:
    """Add one to the counter ``key`` (kept for ``seconds`` from its first count); its count."""
    cache = shared_cache()
    script = _count_script()
    if script is not None:
        return int(script(keys=[cache.make_and_validate_key(key)], args=[seconds]))
    cache.add(key, 0, seconds)
    try:
        return int(cache.incr(key))
    except ValueError:  # it expired between the two calls: this request starts it again
        cache.add(key, 1, seconds)
        return 1


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


def count_or_none(key: str, seconds: int) -> int | None:
    """``count``, or None when the cache cannot be reached (logged once in a while)."""
    try:
        return count(key, seconds)
    except (RedisError, OSError) as exc:
        if _warn_unavailable.due():
            log.warning(
                "API rate limits are not enforced: the cache is unreachable (%s); "
                "requests are let through until it answers (said at most every %.0f s)",
                exc,
                WARN_EVERY_SECONDS,
            )
        return None


@receiver(setting_changed)
def _settings_changed(setting: str, **kwargs: Any) -> None:
    if setting == "CACHES":  # tests swap the cache
        shared_cache.cache_clear()
        _count_script.cache_clear()


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
        seen = count_or_none(f"{key}:{window}", int(self.duration) + 1)
        return seen is None or seen <= self.num_requests

    def wait(self) -> float:
        return max(self.window_ends - self.now, 1.0)

    def timer(self) -> float:
        return time.time()


class UserRateThrottle(WindowCounter, throttling.UserRateThrottle):
    """``API_RATE_USER`` per authenticated user (anonymous calls count by address)."""


class AnonRateThrottle(WindowCounter, throttling.AnonRateThrottle):
    """``API_RATE_ANON`` per address for calls without a user."""
