"""A request line or header longer than daphne accepts gets an answer that says so (414, 431)
from the real server, not a dropped connection."""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support.servers import daphne

pytestmark = pytest.mark.django_db(transaction=True)


def exchange(base: str, request: bytes) -> bytes:
    """Send ``request`` whole, then read the answer until the server closes."""
    address = urlsplit(base)
    with socket.create_connection((address.hostname, address.port), timeout=30) as connection:
        connection.sendall(request)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    return answer


def test_a_one_megabyte_query_string_gets_a_414_and_a_short_one_an_answer(tmp_path: Path):
    with daphne(tmp_path / "daphne.log") as base:
        for size, status in ((8_000, b"401"), (1024 * 1024, b"414")):
            query = b"keyword=" + b"a" * size
            request = b"GET /api/v2/jobs?" + query + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            answer = exchange(base, request + b"Connection: close\r\n\r\n")
            assert answer.startswith(b"HTTP/1.1 " + status), answer[:200]
        assert b"longer than 16384 bytes" in answer
        header = b"X-Long: " + b"b" * 40_000
        request = b"GET /api/v2/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n" + header + b"\r\n\r\n"
        assert exchange(base, request).startswith(b"HTTP/1.1 431")
