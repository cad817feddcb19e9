"""Flow control for streamed responses under daphne: the one piece of serving kept by hand.

daphne writes every body message it is sent into Twisted's buffer at once, whether or not the
client takes it, so a log download read from disk faster than the network carries it ended up
in memory: serving a 200 MB log to a local client grew daphne by 111 MB with Django's own ASGI
handler alone, by 17 MB with this (``tests/api/test_log_streaming.py`` measures it; a
1 GiB log to a slow client once held 5 GB). Twisted pauses and resumes a producer registered on
the request as its buffer fills and drains; a streamed body waits for it before each chunk.
uvicorn does this itself; daphne stays because it also serves the WebSockets and answers an
over-long request line (``portal.longrequests``).
"""

from __future__ import annotations

import asyncio
from typing import Any

Message = dict[str, Any]


class _Producer:
    """A Twisted push producer that only says whether the connection may take more."""

    def __init__(self) -> None:
        self.may_send = asyncio.Event()  # Twisted runs on the same asyncio loop under daphne
        self.may_send.set()

    def pauseProducing(self) -> None:  # noqa: N802 - Twisted's interface
        self.may_send.clear()

    def resumeProducing(self) -> None:  # noqa: N802
        self.may_send.set()

    def stopProducing(self) -> None:  # noqa: N802 - the connection is gone: stop waiting
        self.may_send.set()


def daphne_request(send: Any) -> Any | None:
    """daphne's request behind ``send`` (``partial(server.handle_reply, request)``), or None
    under another server."""
    args = getattr(send, "args", ())
    request = args[0] if args else None
    return request if callable(getattr(request, "registerProducer", None)) else None


class StreamFlowControl:
    """ASGI middleware for ``http``: each chunk of a streamed body waits while the
    connection's send buffer is full."""

    def __init__(self, app: Any) -> None:  # an ASGI application
        self.app = app

    async def __call__(self, scope: Message, receive: Any, send: Any) -> None:
        request = daphne_request(send)
        if request is None:
            await self.app(scope, receive, send)
            return
        producer = _Producer()

        def unregister() -> None:
            if request.producer is producer and request.channel is not None:
                request.unregisterProducer()

        async def paced_send(message: Message) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body"):
                    if request.producer is None and request.channel is not None:
                        request.registerProducer(producer, True)
                    await producer.may_send.wait()
                else:
                    unregister()
            await send(message)

        try:
            await self.app(scope, receive, paced_send)
        finally:
            unregister()
