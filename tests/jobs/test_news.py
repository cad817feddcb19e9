"""The job page's WebSocket: news for the owner and admins, nothing for anyone else."""

from __future__ import annotations

import pytest
from channels.layers import get_channel_layer

from jobs import lifecycle
from jobs.news import group_name, queue_group_name
from tests.jobs.websockets import open_socket

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]

HELLO = (
    "protocolVersion: 2\nname: hello\ntype: job\n"
    "prerequisites: [{name: img, type: dockerimage, uri: python}]\ntaskRoles:\n  main:\n"
    "    dockerImage: img\n    resourcePerInstance: {cpu: 1, memoryMB: 100, gpu: 0}\n"
    "    commands: [echo hi]\n"
)


async def connect(client, job_id: int, origin: bytes = b"http://localhost"):
    return await open_socket(client, f"/ws/jobs/{job_id}/", origin)


@pytest.fixture
def job(alice):
    return lifecycle.submit(alice, HELLO)


async def test_the_sockets_run_over_channels_redis_on_the_test_redis(settings):
    """What users run: the layer of settings.py, not an in-memory stand-in, under this test's
    own key prefix (tests/conftest.py)."""
    from channels_redis.core import RedisChannelLayer

    layer = get_channel_layer()
    assert isinstance(layer, RedisChannelLayer)
    assert layer.prefix.startswith("test-")
    assert layer.hosts[0]["address"] == settings.REDIS_URL


async def test_the_owner_hears_of_every_change(job, alice, async_client_for):
    client = await async_client_for(alice)
    communicator, connected, _ = await connect(client, job.id)
    assert connected
    await get_channel_layer().group_send(group_name(job.id), {"type": "job.changed", "job": job.id})
    assert await communicator.receive_json_from(timeout=2) == {"changed": job.id}
    await communicator.disconnect()


async def test_a_waiting_jobs_page_hears_when_its_queue_moves(job, alice, async_client_for):
    client = await async_client_for(alice)
    communicator, connected, _ = await connect(client, job.id)
    assert connected
    await get_channel_layer().group_send(queue_group_name("default"), {"type": "queue.changed"})
    assert await communicator.receive_json_from(timeout=2) == {"changed": job.id}
    await get_channel_layer().group_send(queue_group_name("other"), {"type": "queue.changed"})
    assert await communicator.receive_nothing(timeout=0.3)
    await communicator.disconnect()


async def test_a_running_jobs_page_does_not_hear_of_its_queue(job, alice, async_client_for):
    from channels.db import database_sync_to_async

    from jobs.models import Job

    await database_sync_to_async(Job.objects.filter(id=job.id).update)(state="RUNNING")
    client = await async_client_for(alice)
    communicator, connected, _ = await connect(client, job.id)
    assert connected
    await get_channel_layer().group_send(queue_group_name("default"), {"type": "queue.changed"})
    assert await communicator.receive_nothing(timeout=0.3)
    await communicator.disconnect()


async def close_code(communicator) -> int:
    """The code the server closed with, right after it accepted."""
    message = await communicator.receive_output(timeout=2)
    assert message["type"] == "websocket.close"
    return message["code"]


async def test_another_user_is_accepted_then_told_4404(job, bob, async_client_for):
    client = await async_client_for(bob)
    communicator, connected, _ = await connect(client, job.id)
    # Accepted first: a close before accepting reaches the browser as 1006, not as 4404.
    assert connected
    assert await close_code(communicator) == 4404


async def test_a_job_that_does_not_exist_is_told_4404(job, alice, async_client_for):
    client = await async_client_for(alice)
    communicator, connected, _ = await connect(client, job.id + 1000)
    assert connected
    assert await close_code(communicator) == 4404


async def test_a_foreign_origin_is_turned_away(job, alice, async_client_for):
    client = await async_client_for(alice)
    communicator, connected, _ = await connect(client, job.id, origin=b"http://evil.example")
    assert not connected
