"""HTTP under daphne: each request runs Django's WSGI handler in one hop to a worker thread.

Django's ASGI handler runs every sync middleware's ``process_request`` and
``process_response`` through ``sync_to_async`` separately: with our seven middlewares that is
about sixteen thread hops per request, measured at 7 ms of a 404's 7.4 ms on this 2-core
machine. Our views and middlewares are all sync, so the request is handed to one thread once,
the response is built there whole (streamed chunk by chunk only when it streams) and sent back
as one body message, with its Content-Length, so that daphne writes it in one go.
WebSockets keep the ASGI path (``portal.asgi``).
"""

from __future__ import annotations

from collections.abc import Callable
from tempfile import SpooledTemporaryFile
from typing import Any

from asgiref.sync import AsyncToSync, sync_to_async
from asgiref.wsgi import WsgiToAsgiInstance

Message = dict[str, Any]
BODY_IN_MEMORY = 65536  # a larger request body goes to a temporary file first


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
            for message in await self.respond(body):
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
