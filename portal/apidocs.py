"""The API documentation page (Redoc), self-contained: GPU clusters are often air-gapped.

Redoc comes from drf-spectacular-sidecar (served as a static file), the page has no web
fonts, and a Content-Security-Policy keeps the browser on this host: this Redoc's sidebar
asks for its maker's logo at ``cdn.redoc.ly``, which the policy stops before any request
leaves (Redoc then shows no logo)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from drf_spectacular.views import SpectacularRedocView

ONLY_THIS_HOST = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self' 'unsafe-inline'",  # Redoc.init in the page
        "style-src 'self' 'unsafe-inline'",  # Redoc's styled components
        "img-src 'self' data:",
        "worker-src 'self' blob:",  # Redoc's search index
        "connect-src 'self'",
    ]
)


class ApiDocsView(SpectacularRedocView):
    template_name = "api_docs.html"
    url_name = "schema"

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response: HttpResponse = super().get(request, *args, **kwargs)
        response["Content-Security-Policy"] = ONLY_THIS_HOST
        return response
