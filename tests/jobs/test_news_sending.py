"""News is sent from sync code (a reconcile pass, a request's commit) on one event loop per
process, so that the channel layer keeps its Redis connection from one round to the next."""

from __future__ import annotations

import asyncio
import os

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from redis.asyncio.connection import Connection

from jobs import news


def test_rounds_of_news_arrive_over_one_redis_connection(monkeypatch) -> None:
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(news.group_name(7), channel)
    connects: list[int] = []
    real = Connection._connect

    async def counted(self: Connection) -> None:
        connects.append(os.getpid())
        await real(self)

    monkeypatch.setattr(Connection, "_connect", counted)  # a socket opened
    for _ in range(5):
        news.publish([7])
    assert len(connects) <= 1  # a new event loop for each round connected five times
    for _ in range(5):
        message = async_to_sync(asyncio.wait_for)(layer.receive(channel), 5)
        assert message == {"type": "job.changed", "job": 7, "finished": False}


def test_a_forked_process_sends_on_a_loop_of_its_own() -> None:
    """A prefork worker's child has none of its parent's threads: the parent's loop would
    never run what the child gives it."""
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(news.group_name(8), channel)
    news.publish([9])  # the parent has its loop running before it forks, as Celery's may
    child = os.fork()
    if child == 0:
        try:
            news.publish([8])
        finally:
            os._exit(0)
    try:
        message = async_to_sync(asyncio.wait_for)(layer.receive(channel), 5)
        assert message == {"type": "job.changed", "job": 8, "finished": False}
    finally:
        os.waitpid(child, 0)
