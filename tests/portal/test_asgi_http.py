"""HTTP through the ASGI application uvicorn serves (Django's own ASGI handler): a body sent in
pieces or chunked reaches the view whole, and a task's log is sent as it is read."""

from __future__ import annotations

import json

import pytest
from asgiref.testing import ApplicationCommunicator
from django.core.handlers.asgi import ASGIHandler

from jobs.tasklogs import LogResponse
from portal.asgi import application

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


def scope(method: str, path: str, headers: list[tuple[bytes, bytes]] | None = None) -> dict:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"localhost"), *(headers or [])],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


async def exchange(app, request: dict, *bodies: bytes) -> list[dict]:
    communicator = ApplicationCommunicator(app, request)
    for i, body in enumerate(bodies or (b"",)):
        more = i < len(bodies) - 1
        await communicator.send_input({"type": "http.request", "body": body, "more_body": more})
    messages = [await communicator.receive_output(5)]
    while messages[-1]["type"] != "http.response.body" or messages[-1].get("more_body"):
        messages.append(await communicator.receive_output(5))
    await communicator.wait(5)
    return messages


async def test_a_page_comes_back_whole_with_its_length():
    start, *bodies = await exchange(application, scope("GET", "/login/"))
    headers = {name.lower(): value for name, value in start["headers"]}
    body = b"".join(b["body"] for b in bodies)
    assert start["status"] == 200
    assert int(headers[b"content-length"]) == len(body) > 0
    assert b"<form" in body


async def test_a_body_sent_in_pieces_reaches_the_view_whole(alice):
    credentials = json.dumps({"username": "alice", "password": "alice-secret-pw"}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", b"%d" % len(credentials)),
    ]
    request = scope("POST", "/api/v2/authn/basic/login", headers)
    start, body = await exchange(application, request, credentials[:10], credentials[10:])
    assert start["status"] == 200
    assert json.loads(body["body"])["user"] == "alice"


async def test_a_chunked_body_without_a_length_reaches_the_view_whole(alice):
    credentials = json.dumps({"username": "alice", "password": "alice-secret-pw"}).encode()
    headers = [(b"content-type", b"application/json"), (b"transfer-encoding", b"chunked")]
    request = scope("POST", "/api/v2/authn/basic/login", headers)
    start, body = await exchange(application, request, credentials[:7], credentials[7:])
    assert start["status"] == 200
    assert json.loads(body["body"])["user"] == "alice"


async def test_a_log_response_is_sent_chunk_by_chunk_as_it_is_read():
    read: list[bytes] = []

    def chunks():
        for chunk in (b"one ", b"two ", b"three"):
            read.append(chunk)
            yield chunk

    async def app(scope, receive, send):
        response = LogResponse(chunks())
        sent = 0

        async def counting_send(message):
            nonlocal sent
            if message["type"] == "http.response.body" and message.get("body"):
                sent += 1
                # Django's own handler would have read the whole iterator before the first one
                assert len(read) == sent, "a chunk was read before the previous one was sent"
            await send(message)

        await ASGIHandler().send_response(response, counting_send)

    messages = await exchange(app, scope("GET", "/stream"))
    assert b"".join(m.get("body", b"") for m in messages[1:]) == b"one two three"
    assert len([m for m in messages if m.get("body")]) == 3
