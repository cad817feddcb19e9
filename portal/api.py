"""API-wide error shape: OpenPAI's ``{code, message}``, plus field errors when there are some."""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

CODES = {
    400: "BadRequestError",
    401: "UnauthorizedUserError",
    403: "ForbiddenUserError",
    404: "NoJobError",
    405: "MethodNotAllowedError",
    409: "ConflictJobError",
    413: "RequestTooLargeError",
    415: "UnsupportedMediaTypeError",
    429: "TooManyRequestsError",
}


def flatten(detail: Any, path: str = "") -> list[str]:
    """DRF's nested error detail as ``field: message`` lines."""
    if isinstance(detail, dict):
        lines: list[str] = []
        for key, value in detail.items():
            name = "" if key == "non_field_errors" else str(key)
            lines += flatten(value, f"{path}.{name}" if path and name else path or name)
        return lines
    if isinstance(detail, list):
        return [line for item in detail for line in flatten(item, path)]
    return [f"{path}: {detail}" if path else str(detail)]


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    data = response.data
    if isinstance(data, dict) and "code" in data and "message" in data:
        return response
    lines = flatten(data.get("detail", data) if isinstance(data, dict) else data)
    body: dict[str, Any] = {
        "code": CODES.get(response.status_code, "Error"),
        "message": "; ".join(lines),
    }
    if isinstance(exc, exceptions.ValidationError):
        body["errors"] = lines
    response.data = body
    return response


def not_found(request: Any, exception: Exception) -> Any:
    """Django's 404 page, but OpenPAI's JSON error under ``/api/`` (a path no route matches)."""
    from django.http import JsonResponse
    from django.views.defaults import page_not_found

    if request.path.startswith("/api/"):
        message = f"no such API path: {request.path}"
        return JsonResponse({"code": "NoApiError", "message": message}, status=404)
    return page_not_found(request, exception)
