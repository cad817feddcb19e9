"""The API's JSON parser: DRF's, refusing with a 400 that names the field what no field may
hold (NUL, lone surrogates: see ``portal.inputguard``), integers too long for Python to
convert, and JSON nested deeper than any of our fields (Python's parser raised RecursionError
on 20,000 levels: a 500). Imports nothing that reads DRF's settings (it is one of them)."""

from __future__ import annotations

import codecs
import json
import sys
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from jobs.protocol.characters import check_characters, unstorable_value
from jobs.protocol.errors import Issues

MAX_JSON_DEPTH = 32  # our deepest field (a job's JSON) nests far less
MAX_DIGITS = sys.get_int_max_str_digits() or 4300


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
