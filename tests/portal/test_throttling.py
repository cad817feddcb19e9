"""The rate limit's counters live in one cache client per process."""

from __future__ import annotations

import contextvars
import os

from django.core.cache import caches

from portal.throttling import UserRateThrottle, _count_script, count, shared_cache

REDIS = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")


def test_every_request_context_counts_through_the_same_cache_client():
    # Under daphne each request runs in an asyncio task whose context starts without Django's
    # cache handles: as here, in a fresh context.
    def client_seen_by_a_request() -> tuple[object, object]:
        return UserRateThrottle().cache, caches["default"]

    first = contextvars.Context().run(client_seen_by_a_request)
    second = contextvars.Context().run(client_seen_by_a_request)
    assert first[0] is second[0] is shared_cache()
    assert first[1] is not second[1]  # why: Django's own cache handle is per context


def test_a_new_cache_setting_gets_a_new_client(settings):
    before = shared_cache()
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}}
    assert shared_cache() is not before
    assert type(shared_cache()).__name__ == "DummyCache"


def test_on_redis_a_count_is_one_script_call_that_gives_a_new_counter_its_lifetime(settings):
    import uuid

    import redis

    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS}
    }
    key = f"test-throttle-{uuid.uuid4().hex}"
    assert _count_script() is not None  # Redis: the script, not add and incr
    assert [count(key, 60) for _ in range(3)] == [1, 2, 3]
    server = redis.Redis.from_url(REDIS)
    stored = shared_cache().make_and_validate_key(key)
    assert int(server.get(stored)) == 3
    assert 0 < server.ttl(stored) <= 60
    server.delete(stored)


def test_on_another_cache_a_count_adds_then_increments(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    assert [count("test-throttle-local", 60) for _ in range(3)] == [1, 2, 3]
