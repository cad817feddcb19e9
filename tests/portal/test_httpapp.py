"""HTTP through the ASGI application daphne serves: Django's handler in one thread hop, the
response in one body message with its length."""

from __future__ import annotations

import json

import pytest
from asgiref.testing import ApplicationCommunicator
from django.http import StreamingHttpResponse

from portal.asgi import application
from portal.httpapp import WsgiOverAsgi

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


async def test_a_page_comes_back_in_one_body_message_with_its_length():
    start, body = await exchange(application, scope("GET", "/login/"))
    headers = dict(start["headers"])
    assert start["status"] == 200
    assert int(headers[b"content-length"]) == len(body["body"]) > 0
    assert b"<form" in body["body"] and not body.get("more_body")


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


async def test_a_streaming_response_is_sent_as_it_comes():
    def wsgi(environ, start_response):
        response = StreamingHttpResponse(iter([b"one ", b"two"]))
        start_response("200 OK", list(response.items()))
        return response

    messages = await exchange(WsgiOverAsgi(wsgi), scope("GET", "/stream"))
    assert [m["type"] for m in messages] == ["http.response.start"] + ["http.response.body"] * 3
    assert b"".join(m["body"] for m in messages[1:]) == b"one two"
