"""A request that needs Redis (the broker, the cache, the channel layer) or the database while
it is down gets a 503 that says so, never a 500: OpenPAI's JSON error under ``/api/``, a page
elsewhere.

Reads do not need Redis (the rate limit fails open, news is best effort, a submission's
reconcile request runs after the commit and the beat pass picks the job up later); this is the
net for whatever write still does, raised before its transaction committed (so nothing of it is
stored). Every request needs the database: while it refuses connections (restarting, out of
connection slots) or a connection fails mid-request, the request's transaction is rolled back
unless it was the commit itself that failed, which the answer says.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import InterfaceError as DatabaseInterfaceError
from django.db import OperationalError as DatabaseOperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from kombu.exceptions import OperationalError as BrokerOperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

log = logging.getLogger(__name__)

REDIS_DOWN = (RedisConnectionError, RedisTimeoutError, BrokerOperationalError)
DATABASE_DOWN = (DatabaseOperationalError, DatabaseInterfaceError)
MESSAGE = (
    "the portal cannot reach Redis (its message broker and cache) at the moment, so this "
    "request was not carried out; nothing was stored: try again in a moment"
)
DATABASE_MESSAGE = (
    "the portal's database did not answer (it may be restarting or overloaded), so this "
    "request was not carried out, unless the database failed as it saved it: look, then try "
    "again in a moment"
)


def unavailable_response(request: HttpRequest, database_down: bool = False) -> HttpResponse:
    """The 503: Redis is down (nothing was stored), or the database (its commit may have
    failed, so the page does not say nothing changed)."""
    message = DATABASE_MESSAGE if database_down else MESSAGE
    if request.path.startswith("/api/"):
        body = {"code": "ServiceUnavailable", "message": message}
        response: HttpResponse = JsonResponse(body, status=503)
    else:
        context = {"message": message, "path": request.path, "unchanged": not database_down}
        if database_down:  # without the request, as Django's 500 page: its layout would ask
            # the database for the user, which would fail again
            response = HttpResponse(render_to_string("503.html", context), status=503)
        else:
            response = render(request, "503.html", context, status=503)
    response["Retry-After"] = "5"
    return response


class ServiceUnavailableMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> Any:
        if isinstance(exception, REDIS_DOWN):
            log.warning("%s %s: Redis is unreachable: %s", request.method, request.path, exception)
            return unavailable_response(request)
        if isinstance(exception, DATABASE_DOWN):
            log.warning("%s %s: the database failed: %s", request.method, request.path, exception)
            return unavailable_response(request, database_down=True)
        return None
