"""Input no field may hold, refused in one place with a 400 that names the field.

PostgreSQL refuses a NUL character in text, and a lone surrogate (JSON's ``"\\ud800"``) cannot
be encoded at all: either one, in any filter, form field, path part or JSON value, used to end
as a 500 wherever it reached the database or a response. This middleware checks the path's
parts, the query string and the forms of pages; the API's bodies are checked by its parsers
(``apikit.parsers``), a job's own text by the protocol (``protocol.characters``), with
the job's paths in the message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse, QueryDict

from apikit.errors import bad_request_response
from apikit.parsers import first_unstorable

FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def form_fields(request: HttpRequest) -> QueryDict:
    """The request's form: Django reads it only for POST; a PUT's or a PATCH's is read here
    from the body when it is URL-encoded."""
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
        # An API view's body is read by its own parsers (``apikit.parsers`` check forms too):
        # read here, a job file sent as a form (``curl -d @job.yaml``) would be taken apart.
        api_view = getattr(view, "cls", None) is not None  # DRF's as_view() sets it
        if not (problem or api_view) and request.content_type in FORM_TYPES:
            problem = first_unstorable(form_fields(request).lists())
        return bad_request_response(request, problem) if problem else None
