"""HTTP and WebSocket entry point, served by daphne: Django's own ASGI handler for HTTP (with
flow control for streamed bodies, ``portal.flowcontrol``), the Channels consumers for
WebSockets."""

from __future__ import annotations

import os
from typing import Any

import django
from django.core.handlers.asgi import ASGIHandler, ASGIRequest

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
django.setup(set_prefix=False)  # before the imports below, which load models

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from jobs.routing import websocket_urlpatterns  # noqa: E402
from portal.flowcontrol import StreamFlowControl  # noqa: E402
from portal.longrequests import install as answer_long_request_lines  # noqa: E402
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
    request_class = Request


answer_long_request_lines()  # a 414, not a dropped connection, for a 1 MB query string

application = ProtocolTypeRouter(
    {
        "http": StreamFlowControl(Handler()),
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
