"""Content negotiation for the views that pick their own answer's type (a job's config as
JSON or YAML): DRF's renderers know JSON only, and must not refuse ``Accept: text/yaml``
with 406 before the view has chosen."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request


class ViewChoosesType(DefaultContentNegotiation):
    """DRF's choice when it has one, else its first renderer (used for errors only: the view
    answers with its own ``HttpResponse`` of the type the client asked for)."""

    def select_renderer(
        self, request: Request, renderers: Sequence[BaseRenderer], format_suffix: Any = None
    ) -> tuple[BaseRenderer, str]:
        try:
            chosen: tuple[BaseRenderer, str] = super().select_renderer(
                request, renderers, format_suffix
            )
        except NotAcceptable:
            return renderers[0], str(renderers[0].media_type)
        return chosen
