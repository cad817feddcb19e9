"""A request that needs Redis (the broker, the cache, the channel layer) while it is down gets a
503 that says so, never a 500: OpenPAI's JSON error under ``/api/``, a page elsewhere.

Reads do not need Redis (the rate limit fails open, news is best effort, a submission's
reconcile request runs after the commit and the beat pass picks the job up later); this is the
net for whatever write still does, raised before its transaction committed (so nothing of it is
stored).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from kombu.exceptions import OperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

log = logging.getLogger(__name__)

UNAVAILABLE = (RedisConnectionError, RedisTimeoutError, OperationalError)
MESSAGE = (
    "the portal cannot reach Redis (its message broker and cache) at the moment, so this "
    "request was not carried out; nothing was stored: try again in a moment"
)


def unavailable_response(request: HttpRequest) -> HttpResponse:
    if request.path.startswith("/api/"):
        body = {"code": "ServiceUnavailable", "message": MESSAGE}
        response: HttpResponse = JsonResponse(body, status=503)
    else:
        response = render(request, "503.html", {"message": MESSAGE}, status=503)
    response["Retry-After"] = "5"
    return response


class ServiceUnavailableMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> Any:
        if not isinstance(exception, UNAVAILABLE):
            return None
        log.warning("%s %s: Redis is unreachable: %s", request.method, request.path, exception)
        return unavailable_response(request)
