"""The job list's WebSocket (``/ws/jobs/?ids=...``), through the real ASGI application over
channels-redis on the real Redis: news of the listed jobs the user may see, nothing else."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async

from jobs import lifecycle, news
from jobs.models import Job
from tests.clusters.helpers import vc
from tests.jobs.samples import hello_job
from tests.jobs.websockets import open_socket

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


async def list_socket(client, *ids: int):
    return await open_socket(client, "/ws/jobs/?ids=" + ",".join(str(i) for i in ids))


async def test_the_list_hears_when_a_listed_job_changes(alice, async_client_for):
    first = await sync_to_async(lifecycle.submit)(alice, hello_job("first"))
    second = await sync_to_async(lifecycle.submit)(alice, hello_job("second"))
    communicator, connected, _ = await list_socket(await async_client_for(alice), first.id)
    assert connected
    await sync_to_async(news.publish)([second.id])  # not listed: nothing
    assert await communicator.receive_nothing(timeout=0.5)
    await sync_to_async(news.publish)([first.id])
    assert await communicator.receive_json_from(timeout=5) == {"changed": first.id}
    await communicator.disconnect()


async def test_jobs_one_may_not_list_are_not_followed(alice, bob, async_client_for):
    await database_sync_to_async(vc)("private", alice)
    text = hello_job("hidden").replace(
        "type: job", "type: job\ndefaults: {virtualCluster: private}"
    )
    hidden = await sync_to_async(lifecycle.submit)(alice, text)
    communicator, connected, _ = await list_socket(await async_client_for(bob), hidden.id)
    assert connected
    await sync_to_async(news.publish)([hidden.id])
    assert await communicator.receive_nothing(timeout=0.5)
    await communicator.disconnect()


async def test_ended_jobs_are_not_followed(alice, async_client_for):
    done = await sync_to_async(lifecycle.submit)(alice, hello_job("done"))
    await database_sync_to_async(Job.objects.filter(id=done.id).update)(state="SUCCEEDED")
    communicator, connected, _ = await list_socket(await async_client_for(alice), done.id)
    assert connected
    await sync_to_async(news.publish)([done.id])
    assert await communicator.receive_nothing(timeout=0.5)
    await communicator.disconnect()


async def test_an_anonymous_visitor_is_closed_with_4404(alice):
    from channels.testing import WebsocketCommunicator

    from portal.asgi import application

    job = await sync_to_async(lifecycle.submit)(alice, hello_job("seen"))
    headers = [(b"origin", b"http://localhost"), (b"host", b"localhost")]
    communicator = WebsocketCommunicator(application, f"/ws/jobs/?ids={job.id}", headers=headers)
    connected, _ = await communicator.connect(timeout=5)
    assert connected
    message = await communicator.receive_output(timeout=5)
    assert message == {"type": "websocket.close", "code": 4404}
