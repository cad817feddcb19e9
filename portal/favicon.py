"""``/favicon.ico``, which browsers ask for on every page: the portal's icon, not a 404."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_safe

ICON = Path(settings.BASE_DIR) / "static" / "portal" / "favicon.ico"


@cache
def icon_bytes() -> bytes:
    return ICON.read_bytes()


@require_safe
@cache_control(public=True, max_age=7 * 24 * 3600)
def favicon(request: HttpRequest) -> HttpResponse:
    return HttpResponse(icon_bytes(), content_type="image/x-icon")
