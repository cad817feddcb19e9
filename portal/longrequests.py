"""Answers, instead of a dropped connection, for a request whose first line or a header line is
longer than daphne accepts (Twisted's HTTP server, 16 KiB a line).

Twisted closes such a connection without a word (a ``LineReceiver``'s default), so a client
with a 1 MB query string saw the connection drop and could not tell why. Here it gets a 414
(the request line) or a 431 (a header line), and what it still sends of the request is read
and dropped before the connection closes: closing while it sends would reset the connection,
and the client might lose the answer.
"""

from __future__ import annotations

from typing import Any

from twisted.web import http

MAX_LINE = http.HTTPChannel.MAX_LENGTH
DISCARD_AT_MOST = 16 * 1024 * 1024  # then the connection closes anyway
END_OF_HEAD = b"\r\n\r\n"


def _answer(status: bytes, message: str) -> bytes:
    body = message.encode()
    head = (
        b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain; charset=utf-8\r\n"
        b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n"
    )
    return head + body


def _line_too_long(channel: Any, line: bytes) -> None:
    if getattr(channel, "_HTTPChannel__first_line", True):
        answer = _answer(
            b"414 URI Too Long",
            f"the request line is longer than {MAX_LINE} bytes: send long data in the body\n",
        )
    else:
        answer = _answer(
            b"431 Request Header Fields Too Large",
            f"a request header is longer than {MAX_LINE} bytes\n",
        )
    channel.transport.write(answer)
    tail = line[-len(END_OF_HEAD) :]
    seen = len(line)

    def discard(data: bytes) -> None:
        nonlocal tail, seen
        seen += len(data)
        if END_OF_HEAD in tail + data or seen > DISCARD_AT_MOST:
            channel.loseConnection()
        tail = (tail + data)[-len(END_OF_HEAD) :]

    if END_OF_HEAD in line:
        channel.loseConnection()
        return
    channel.rawDataReceived = discard
    channel.setRawMode()


def install() -> None:
    """Answer over-long lines on every HTTP connection of this process (idempotent)."""
    http.HTTPChannel.lineLengthExceeded = _line_too_long
