"""WebSockets open only from the portal's own origin: scheme, host and port.

Every job serves pages on ports of the portal's host; a page on one of them must not open its
visitor's job news or terminal. Through the real ASGI application over channels-redis."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator

from jobs import lifecycle
from jobs.news import group_name
from jobs.states import TaskState
from portal.asgi import application
from tests.jobs.helpers import reconcile_until, settle
from tests.jobs.samples import hello_job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]

PORTAL = b"localhost:8000"


async def open_from(
    client, path: str, origin: bytes | None, host: bytes = PORTAL, scheme: str = "ws", **headers
):
    """``(communicator, connected)`` for a socket to ``host`` opened by a page of ``origin``."""
    sent = [(b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()), (b"host", host)]
    if origin is not None:
        sent.append((b"origin", origin))
    sent += [(name.replace("_", "-").encode(), value) for name, value in headers.items()]
    communicator = WebsocketCommunicator(application, path, headers=sent)
    communicator.scope["scheme"] = scheme
    connected, _ = await communicator.connect(timeout=5)
    return communicator, connected


@pytest.fixture
def job(alice):
    return lifecycle.submit(alice, hello_job("origin"))


@pytest.mark.parametrize(
    "origin",
    [
        b"http://localhost:8001",  # a job's page on another port of the same host
        b"http://localhost",  # port 80
        b"https://localhost:8000",  # another scheme
        b"http://127.0.0.1:8000",  # another host, though an allowed one
        b"http://evil.example:8000",
        b"null",
        None,  # no Origin at all
    ],
)
async def test_job_news_is_refused_from_any_other_origin(job, alice, async_client_for, origin):
    client = await async_client_for(alice)
    _, connected = await open_from(client, f"/ws/jobs/{job.id}/", origin)
    assert not connected


async def test_job_news_flows_to_the_portals_own_origin(job, alice, async_client_for):
    client = await async_client_for(alice)
    communicator, connected = await open_from(
        client, f"/ws/jobs/{job.id}/", b"http://localhost:8000"
    )
    assert connected
    layer = get_channel_layer()
    assert type(layer).__name__ == "RedisChannelLayer"
    await layer.group_send(group_name(job.id), {"type": "job.changed", "job": job.id})
    assert await communicator.receive_json_from(timeout=5) == {"changed": job.id}
    await communicator.disconnect()


async def test_the_job_lists_news_opens_only_from_the_portals_own_origin(
    job, alice, async_client_for
):
    client = await async_client_for(alice)
    path = f"/ws/jobs/?ids={job.id}"
    for origin in (b"http://localhost:8001", b"http://127.0.0.1:8000", None):
        _, connected = await open_from(client, path, origin)
        assert not connected, origin
    communicator, connected = await open_from(client, path, b"http://localhost:8000")
    assert connected
    await get_channel_layer().group_send(group_name(job.id), {"type": "job.changed", "job": job.id})
    assert await communicator.receive_json_from(timeout=5) == {"changed": job.id}
    await communicator.disconnect()


async def test_a_host_the_portal_does_not_serve_is_refused_even_from_itself(
    job, alice, async_client_for
):
    """A rebound DNS name points at the portal: its Host is its own Origin, but not allowed."""
    client = await async_client_for(alice)
    _, connected = await open_from(
        client, f"/ws/jobs/{job.id}/", b"http://evil.example:8000", host=b"evil.example:8000"
    )
    assert not connected


async def test_over_tls_the_origin_is_https(job, alice, async_client_for):
    client = await async_client_for(alice)
    path = f"/ws/jobs/{job.id}/"
    _, connected = await open_from(client, path, b"https://localhost:8000", scheme="wss")
    assert connected
    _, connected = await open_from(client, path, b"http://localhost:8000", scheme="wss")
    assert not connected


async def test_a_trusted_proxys_scheme_counts_only_when_configured(
    job, alice, async_client_for, settings
):
    client = await async_client_for(alice)
    path = f"/ws/jobs/{job.id}/"
    origin = b"https://localhost:8000"
    _, connected = await open_from(client, path, origin, x_forwarded_proto=b"https")
    assert not connected
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    _, connected = await open_from(client, path, origin, x_forwarded_proto=b"https")
    assert connected


async def test_an_origin_listed_as_trusted_is_accepted(job, alice, async_client_for, settings):
    client = await async_client_for(alice)
    path = f"/ws/jobs/{job.id}/"
    settings.CSRF_TRUSTED_ORIGINS = ["https://portal.example", "https://*.lab.example:8443"]
    for origin in (b"https://portal.example", b"https://gpu.lab.example:8443"):
        _, connected = await open_from(client, path, origin)
        assert connected, origin
    for origin in (b"https://portal.example:8443", b"http://portal.example", b"https://lab.evil"):
        _, connected = await open_from(client, path, origin)
        assert not connected, origin


async def test_the_terminal_opens_only_from_the_portals_own_origin(
    alice, backend, async_client_for
):
    from jobs.models import Task

    def start():
        job = lifecycle.submit(alice, hello_job("term", command="sleep 60"))
        reconcile_until(
            backend,
            lambda: Task.objects.filter(attempt__job=job, state=TaskState.RUNNING).exists(),
        )
        return job, Task.objects.get(attempt__job=job)

    job, task = await sync_to_async(start)()
    client = await async_client_for(alice)
    path = f"/ws/tasks/{task.id}/terminal/"
    for origin in (b"http://localhost:8001", b"http://127.0.0.1:8000", b"http://evil.example"):
        _, connected = await open_from(client, path, origin)
        assert not connected, origin
    communicator, connected = await open_from(client, path, b"http://localhost:8000")
    assert connected
    await communicator.disconnect()
    await sync_to_async(lifecycle.stop)(job, alice)
    await sync_to_async(settle)(backend, job)
