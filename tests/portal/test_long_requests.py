"""A request line or header longer than the web server reads gets an answer from the real
server, not a dropped connection, and what it holds of a request head stays bounded: uvicorn
parses HTTP with h11, which refuses a head of which more than 16 KiB is still incomplete
after a read (httptools reads a header of any length into memory, and answers it)."""

from __future__ import annotations

import contextlib
import http.client
import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support.servers import web_server

pytestmark = pytest.mark.django_db(transaction=True)


def exchange(base: str, request: bytes) -> bytes:
    """Send ``request`` (as much as the server takes before it closes), then read the answer
    until the server closes."""
    address = urlsplit(base)
    with socket.create_connection((address.hostname, address.port), timeout=30) as connection:
        with contextlib.suppress(ConnectionResetError):  # closed while the request was sent
            connection.sendall(request)
        answer = b""
        try:
            while chunk := connection.recv(65536):
                answer += chunk
        except ConnectionResetError:  # closed with part of the request unread: the answer is in
            pass
    return answer


def test_a_one_megabyte_query_string_or_header_gets_a_400_and_a_short_one_an_answer(
    tmp_path: Path,
):
    with web_server(tmp_path / "server.log") as base:
        for size, status in ((8_000, b"401"), (1024 * 1024, b"400")):
            query = b"keyword=" + b"a" * size
            request = b"GET /api/v2/jobs?" + query + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            answer = exchange(base, request + b"Connection: close\r\n\r\n")
            assert answer.startswith(b"HTTP/1.1 " + status), answer[:200]
        assert b"Invalid HTTP request" in answer
        for size, status in ((8_000, b"401"), (1024 * 1024, b"400"), (20 * 1024 * 1024, b"400")):
            header = b"X-Long: " + b"b" * size
            request = b"GET /api/v2/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n" + header + b"\r\n"
            answer = exchange(base, request + b"Connection: close\r\n\r\n")
            assert answer.startswith(b"HTTP/1.1 " + status), (size, answer[:200])


def test_an_idle_keep_alive_connection_serves_the_next_request(tmp_path: Path):
    """A script's connection waits between its calls (polling, other work) longer than
    uvicorn's default 5 s: http.client, like most clients, does not retry a connection the
    server closed meanwhile."""
    with web_server(tmp_path / "server.log") as base:
        address = urlsplit(base)
        connection = http.client.HTTPConnection(address.hostname, address.port, timeout=30)
        for _ in range(2):
            connection.request("GET", "/login/")
            response = connection.getresponse()
            assert (response.status, b"<form" in response.read()) == (200, True)
            time.sleep(8)
        connection.close()
