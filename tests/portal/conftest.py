"""Fixtures of the portal's own tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.servers import RedisServer


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A redis-server of the test's own on the loopback, without a password (as a machine's
    own often is), which the test may stop and start."""
    server = RedisServer()
    server.start()
    yield server
    server.stop()
