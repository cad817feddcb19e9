"""Input no field may hold, refused in one place with a 400 that names the field.

PostgreSQL refuses a NUL character in text, and a lone surrogate (JSON's ``"\\ud800"``) cannot
be encoded at all: either one, in any filter, form field, path part or JSON value, used to end
as a 500 wherever it reached the database or a response. This middleware checks the path's
parts, the query string and form fields; JSON bodies are checked by ``portal.parsers``, a job's
own text by the protocol (``jobs.protocol.characters``), with the job's paths in the message.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from django.http import HttpRequest, HttpResponse, QueryDict

from jobs.protocol.characters import unstorable
from portal.api import bad_request_response

FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def first_unstorable(fields: Iterable[tuple[str, list[Any]]]) -> str | None:
    """``name: why`` for the first field whose name or a value cannot be stored."""
    for name, values in fields:
        problem = unstorable(name)
        if problem:
            return f"the field name {json.dumps(name[:60])} {problem}"
        for value in values:
            problem = unstorable(value) if isinstance(value, str) else None
            if problem:
                return f"{name}: {problem}"
    return None


def form_fields(request: HttpRequest) -> QueryDict:
    """The request's form: Django reads it only for POST; DRF parses a PUT's or a PATCH's
    itself, so it is read here from the body (kept for DRF) when it is URL-encoded."""
    if request.method == "POST":
        return request.POST
    if request.content_type == FORM_TYPES[0]:
        return QueryDict(request.body, encoding=request.encoding)
    return QueryDict()


class InputGuardMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view: Any, args: Any, kwargs: dict[str, Any]
    ) -> HttpResponse | None:
        problem = first_unstorable((name, [value]) for name, value in kwargs.items())
        problem = problem or first_unstorable(request.GET.lists())
        if not problem and request.content_type in FORM_TYPES and request.method != "GET":
            problem = first_unstorable(form_fields(request).lists())
        return bad_request_response(request, problem) if problem else None
