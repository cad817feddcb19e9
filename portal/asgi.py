"""HTTP and WebSocket entry point (daphne). HTTP runs Django's WSGI handler in one thread hop
per request (``portal.httpapp``); WebSockets go to the Channels consumers."""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
django_http_app = get_wsgi_application()  # sets Django up before the imports below

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from jobs.routing import websocket_urlpatterns  # noqa: E402
from portal.httpapp import WsgiOverAsgi  # noqa: E402
from portal.longrequests import install as answer_long_request_lines  # noqa: E402
from portal.origin import SameOriginValidator  # noqa: E402

answer_long_request_lines()  # a 414, not a dropped connection, for a 1 MB query string

application = ProtocolTypeRouter(
    {
        "http": WsgiOverAsgi(django_http_app),
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
