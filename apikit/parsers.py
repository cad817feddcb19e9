"""The API's parsers: DRF's, refusing with a 400 that names the field what no field may hold
(NUL, lone surrogates: see ``portal.inputguard``), and in JSON integers too long for Python to
convert and nesting deeper than any of our fields (Python's parser raised RecursionError on
20,000 levels: a 500). Imports nothing that reads DRF's settings (they name these classes)."""

from __future__ import annotations

import codecs
import json
import sys
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import DataAndFiles, FormParser, JSONParser, MultiPartParser

from protocol.characters import check_characters, unstorable, unstorable_value
from protocol.errors import Issues

MAX_JSON_DEPTH = 32  # our deepest field (a job's JSON) nests far less
MAX_DIGITS = sys.get_int_max_str_digits() or 4300


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


class _LongInteger(str):
    """An integer's digits, too many to convert (found by the parser, refused by the walk)."""


def _integer(digits: str) -> int | str:
    return int(digits) if len(digits.lstrip("-")) <= MAX_DIGITS else _LongInteger(digits)


def _constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def _problem(value: object) -> str | None:
    if isinstance(value, _LongInteger):
        return f"the integer has {len(value.lstrip('-'))} digits, more than {MAX_DIGITS}"
    return unstorable_value(value)


class SafeJSONParser(JSONParser):
    """DRF's JSON parser, refusing with a 400 that names the field: text no field may hold,
    integers too long to convert, JSON nested too deeply."""

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = codecs.getreader(encoding)(stream).read()
            data = json.loads(text, parse_int=_integer, parse_constant=_constant)
        except RecursionError:
            raise ParseError("body: the JSON is nested too deeply") from None
        except ValueError as exc:
            raise ParseError(f"body: JSON parse error - {exc}") from None
        issues = Issues()
        check_characters(data, issues, _problem, MAX_JSON_DEPTH)
        if issues:
            raise ParseError("; ".join(str(issue) for issue in issues.items))
        return data


class SafeFormParser(FormParser):
    """DRF's form parser, refusing a field that holds NUL (400, naming the field)."""

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        data = super().parse(stream, media_type, parser_context)
        problem = first_unstorable(data.lists())
        if problem:
            raise ParseError(problem)
        return data


class SafeMultiPartParser(MultiPartParser):
    """DRF's multipart parser, refusing a field that holds NUL (400, naming the field)."""

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        parsed: DataAndFiles = super().parse(stream, media_type, parser_context)
        problem = first_unstorable(parsed.data.lists())
        if problem:
            raise ParseError(problem)
        return parsed
