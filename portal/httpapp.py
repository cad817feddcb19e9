"""HTTP under daphne: each request runs Django's WSGI handler in one hop to a worker thread.

Django's ASGI handler runs every sync middleware's ``process_request`` and
``process_response`` through ``sync_to_async`` separately: with our seven middlewares that is
about sixteen thread hops per request, measured at 7 ms of a 404's 7.4 ms on this 2-core
machine. Our views and middlewares are all sync, so the request is handed to one thread once,
the response is built there whole (streamed chunk by chunk only when it streams) and sent back
as one body message, with its Content-Length, so that daphne writes it in one go.
WebSockets keep the ASGI path (``portal.asgi``).

A streamed body (a task's log download) waits while the connection's send buffer is full:
daphne writes what it is sent into Twisted's buffer at once, so a 1 GiB log to a slow client
ended up in memory whole. Twisted pauses and resumes a producer registered on daphne's request
(``_Flow``) as its buffer fills and drains; the thread that streams waits on it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from tempfile import SpooledTemporaryFile
from typing import Any

from asgiref.sync import AsyncToSync, sync_to_async
from asgiref.wsgi import WsgiToAsgiInstance

Message = dict[str, Any]
BODY_IN_MEMORY = 65536  # a larger request body goes to a temporary file first
STALLED_SECONDS = 120.0  # a client that takes nothing of a streamed body this long is dropped


class _Flow:
    """A Twisted push producer that only says whether the connection may take more."""

    def __init__(self) -> None:
        self.may_send = threading.Event()
        self.may_send.set()

    def pauseProducing(self) -> None:  # noqa: N802 - Twisted's interface
        self.may_send.clear()

    def resumeProducing(self) -> None:  # noqa: N802
        self.may_send.set()

    def stopProducing(self) -> None:  # noqa: N802
        self.may_send.set()


def _register(request: Any, flow: _Flow) -> bool:
    """Whether ``flow`` now hears when the connection is full (not when it is gone already,
    or another producer holds it: the body is then written without waiting)."""
    if request.channel is None:
        return False
    try:
        request.registerProducer(flow, True)
    except (ValueError, RuntimeError):
        return False
    return True


def _daphne_request(send: Any) -> Any | None:
    """daphne's request behind ``send`` (``partial(server.handle_reply, request)``), or None
    under another server."""
    args = getattr(send, "args", ())
    request = args[0] if args else None
    return request if callable(getattr(request, "registerProducer", None)) else None


class WsgiOverAsgi:
    """An ASGI application for ``http`` scopes that runs ``wsgi_application``."""

    def __init__(self, wsgi_application: Callable[..., Any]) -> None:
        self.wsgi_application = wsgi_application

    async def __call__(self, scope: Message, receive: Any, send: Any) -> None:
        await _OneRequest(self.wsgi_application)(scope, receive, send)


class _OneRequest(WsgiToAsgiInstance):  # type: ignore[misc]
    """asgiref's WSGI adapter (its environ and start_response), answering in one message."""

    async def __call__(self, scope: Message, receive: Any, send: Any) -> None:
        self.scope = scope
        with SpooledTemporaryFile(max_size=BODY_IN_MEMORY) as body:
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return  # the client went away before sending its whole request
                body.write(message.get("body", b""))
                if not message.get("more_body"):
                    break
            self.body_size = body.tell()
            body.seek(0)
            self.sync_send = AsyncToSync(send)  # only a streaming response sends from the thread
            self.flow = _Flow()
            request = _daphne_request(send)
            flowing = request is not None and _register(request, self.flow)
            try:
                messages = await self.respond(body)
            finally:
                if flowing and request.producer is self.flow and request.channel is not None:
                    request.unregisterProducer()
            for message in messages:
                await send(message)

    @sync_to_async
    def respond(self, body: Any) -> list[Message]:
        try:
            environ = self.build_environ(self.scope, body)
        except ValueError:  # too many duplicate headers
            return [
                {"type": "http.response.start", "status": 400, "headers": []},
                {"type": "http.response.body", "body": b"Bad Request"},
            ]
        # A chunked request has no Content-Length, and WSGI reads no more than it says.
        environ.setdefault("CONTENT_LENGTH", str(self.body_size))
        result = self.wsgi_application(environ, self.start_response)
        try:
            if getattr(result, "streaming", False):
                self.sync_send(self.response_start)
                for chunk in result:
                    if not self.flow.may_send.wait(STALLED_SECONDS):
                        break  # the client takes nothing: end the body here
                    self.sync_send({"type": "http.response.body", "body": chunk, "more_body": True})
                return [{"type": "http.response.body", "body": b""}]
            content = b"".join(result)
        finally:
            if hasattr(result, "close"):
                result.close()  # Django's request_finished: old database connections close
        start = self.response_start
        if self.response_content_length is None:
            start["headers"].append((b"content-length", str(len(content)).encode()))
        return [start, {"type": "http.response.body", "body": content}]
