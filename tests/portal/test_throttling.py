"""The rate limit's counters live in one cache client per process."""

from __future__ import annotations

import contextvars

from django.core.cache import caches

from portal.throttling import UserRateThrottle, shared_cache


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
