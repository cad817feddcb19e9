"""OpenPAI's path forms, mapped onto our one set of API routes before Django resolves them.

OpenPAI's router (Express, not strict) takes every path with or without a trailing slash (its
JS SDK sends ``POST /api/v2/users/``), and its deployments serve the REST server under
``/rest-server/`` (its Python SDK puts the prefix before every path). Rewriting the path here
keeps one route per operation, so the published schema lists each operation once.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

PREFIX = "/rest-server"
API_ROOTS = ("/api/v1/", "/api/v2/")


def canonical_api_path(path: str) -> str:
    """``/rest-server/api/v2/users/`` -> ``/api/v2/users``; any other path is left as it is."""
    if path.startswith(PREFIX + "/api/"):
        path = path[len(PREFIX) :]
    if path.startswith(API_ROOTS):
        return path.rstrip("/")
    return path


class ApiPathMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        asked = request.path_info
        path = canonical_api_path(asked)
        if path != asked:
            script_name = request.path[: len(request.path) - len(asked)]
            request.path_info = path
            request.path = script_name + path
        return self.get_response(request)
