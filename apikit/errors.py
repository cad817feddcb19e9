"""API-wide error shape: OpenPAI's ``{code, message}``, plus field errors when there are some."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import JsonResponse
from django.shortcuts import render
from django.views.defaults import page_not_found
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
    503: "ServiceUnavailable",
}
# OpenPAI's text for a call without a token (rest-server middlewares/token.js ``check``).
GUEST_MESSAGE = "Guest is not allowed to do this operation."


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
    if isinstance(exc, exceptions.NotAuthenticated):
        response.data = {"code": CODES.get(response.status_code), "message": GUEST_MESSAGE}
        return response
    lines = flatten(data.get("detail", data) if isinstance(data, dict) else data)
    body: dict[str, Any] = {
        "code": CODES.get(response.status_code, "Error"),
        "message": "; ".join(lines),
    }
    if isinstance(exc, exceptions.ValidationError | exceptions.ParseError):
        body["errors"] = lines
    response.data = body
    return response


def too_big_message() -> str:
    return (
        f"the request is larger than the limit of {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes "
        f"(DATA_UPLOAD_MAX_MEMORY_SIZE); a job file may have at most {settings.JOB_MAX_BYTES} "
        "bytes (JOB_MAX_BYTES)"
    )


def bad_request(request: Any, exception: Exception) -> Any:
    """Django's answer to a request it cannot read (handler400), which it gives before any view
    runs, e.g. when the CSRF check reads a form larger than the limit: says why, as OpenPAI's
    JSON error under ``/api/`` and as a page elsewhere."""
    if isinstance(exception, RequestDataTooBig):
        message = too_big_message()
    elif isinstance(exception, TooManyFieldsSent | TooManyFilesSent):
        message = f"the request has too many fields: {exception}"
    else:
        message = "the request could not be read"
    return bad_request_response(request, message)


def bad_request_response(request: Any, message: str) -> Any:
    """A 400 saying ``message``: OpenPAI's JSON error under ``/api/``, a page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse({"code": "BadRequestError", "message": message}, status=400)
    return render(request, "400.html", {"message": message}, status=400)


def not_found(request: Any, exception: Exception) -> Any:
    """Django's 404 page, but OpenPAI's JSON error under ``/api/`` (a path no route matches)."""
    if request.path.startswith("/api/"):
        message = f"no such API path: {request.path}"
        return JsonResponse({"code": "NoApiError", "message": message}, status=404)
    return page_not_found(request, exception)
