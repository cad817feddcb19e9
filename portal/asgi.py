"""HTTP and WebSocket entry point, served by uvicorn (``runportal``'s ``web_command``): Django's
own ASGI handler for HTTP, the Channels consumers for WebSockets."""

from __future__ import annotations

import os
from typing import Any

import django
from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler, ASGIRequest
from django.http import HttpRequest
from django.http.response import HttpResponseBase

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
django.setup(set_prefix=False)  # before the imports below, which load models

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from jobs.routing import websocket_urlpatterns  # noqa: E402
from portal.origin import SameOriginValidator  # noqa: E402


class Request(ASGIRequest):
    """Django's ASGI request, with the length of a chunked body (``Transfer-Encoding: chunked``
    comes without a ``Content-Length``, and DRF reads no body without one)."""

    def __init__(self, scope: dict[str, Any], body_file: Any) -> None:
        super().__init__(scope, body_file)
        if "CONTENT_LENGTH" not in self.META:
            self.META["CONTENT_LENGTH"] = str(body_file.seek(0, os.SEEK_END))
            body_file.seek(0)


class Handler(ASGIHandler):
    """Django's ASGI handler, running each request's middleware and view in one thread.

    Our middleware and views are all sync. Django's async chain hands the request to a thread
    and back again for the middleware, each ``process_view`` and the view: a job list request
    cost the server 7.6 to 8.6 ms of CPU that way, 5.6 to 6.7 ms in one hop (sequential
    ``GET /api/v2/jobs`` at 100,000 jobs). This uses Django's own sync middleware chain, as
    its WSGI handler does; the request is still Django's ASGI one."""

    request_class = Request

    def __init__(self) -> None:
        super().__init__()
        self.load_middleware(is_async=False)  # Django's sync chain, as under WSGI

    async def get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        response: HttpResponseBase = await sync_to_async(self.get_response)(request)
        return response


application = ProtocolTypeRouter(
    {
        "http": Handler(),
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
