from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser


class JobTextParser(BaseParser):
    """Hands the job file over as text; the protocol, not DRF, decides what it means."""

    media_type = "*/*"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> str:
        limit = settings.JOB_MAX_BYTES
        data: bytes = stream.read(limit + 1) if stream is not None else b""
        if len(data) > limit:
            raise ParseError(f"job file: more than the limit of {limit} bytes")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError(f"job file: not UTF-8 text (byte {exc.start})") from None
