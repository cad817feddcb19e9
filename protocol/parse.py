"""From the text of a job file to Python data: size and encoding checks, then JSON or YAML.

JSON is used when the text starts with ``{`` (after whole-line ``//`` comments, as in
seed 003's example, are blanked); YAML (always through a *safe* loader: no Python tags) is
used otherwise, and as a second chance for ``{``-text whose first key is not quoted (YAML
flow style such as ``{name: x}``). Syntax errors
name the line and column (1-based). Duplicate keys are errors in both syntaxes.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from protocol.errors import ProtocolError

MAX_JOB_BYTES = 1024 * 1024  # the default; the portal passes its JOB_MAX_BYTES

_STRICT_JSON = re.compile(r'^\s*\{\s*(?:"|\}|//)')  # a quoted first key: JSON, not YAML
_BRACE_FIRST = re.compile(r"\s*\{")  # as ``text.lstrip().startswith("{")``, without a copy
_LINE_COMMENT = re.compile(r"^[ \t]*//[^\n]*$", re.MULTILINE)
# What PyYAML's reader refuses, plus what YAML 1.1 reads as a line break (or BOM) and YAML 1.2
# does not; tabs and carriage returns, which the two read differently in corner cases. (Text
# that ``str.isprintable`` passes, once without its newlines, has none of them: a fast test.)
_UNSURE_CHARS = re.compile(
    "[^\n\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]"
)
_ASCII_SURE = bytes(range(0x20, 0x7F)) + b"\n"  # _UNSURE_CHARS's complement, in ASCII


class YamlFloat(float):
    """A float that remembers how it was written (so ``version: 1.10`` stays "1.10")."""

    source: str = ""


class _Loader(yaml.SafeLoader):
    """The safe loader, with duplicate keys refused and float spellings kept.

    Pure Python on purpose: its errors are the ones users see (libyaml's differ, and its C
    recursion crashes on deeply nested text). Most job files never reach it: ``_CLoader``
    reads them, and hands anything it refuses back to it.
    """


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    result: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            duplicate = key in result
        except TypeError:
            raise yaml.constructor.ConstructorError(
                None, None, "found a key that is not a string", key_node.start_mark
            ) from None
        if duplicate:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        result[key] = loader.construct_object(value_node, deep=True)
    return result


def _construct_float(loader: _Loader, node: yaml.ScalarNode) -> float:
    value = YamlFloat(loader.construct_yaml_float(node))
    value.source = str(node.value)
    return value


_Loader.add_constructor("tag:yaml.org,2002:map", _construct_mapping)
_Loader.add_constructor("tag:yaml.org,2002:float", _construct_float)


class _CLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """``_Loader`` on libyaml (about eight times faster), for every text with no character the
    two read differently (``libyaml_agrees``). Only its data is used: when it refuses a text,
    ``_Loader`` parses it again and its error is the one users see. Deep nesting never gets
    here (libyaml's composer recurses in C, without Python's recursion limit).

    It is the fast path: a rapidyaml one (``fastyaml``, 330 lines) was measured and removed
    (issue 30): ``load_job`` of the seed examples took 654 µs a job with it and 771 µs without,
    0.12 ms of a submission's 4.5 ms (224 a second end to end), which no user feels."""


_CLoader.add_constructor("tag:yaml.org,2002:map", _construct_mapping)
_CLoader.add_constructor("tag:yaml.org,2002:float", _construct_float)
_C_MAX_NESTING = 1000  # lines plus flow brackets: a bound on how deeply a text can nest


def decode(text: str | bytes, max_bytes: int = MAX_JOB_BYTES) -> str:
    """The job text as ``str``, refusing what is bigger than ``max_bytes``, not UTF-8, or
    empty."""
    if isinstance(text, bytes | bytearray):
        size = len(text)
    elif isinstance(text, str):  # its UTF-8 size (an ASCII text's length, with no copy)
        size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    else:
        raise ProtocolError.single("", f"a job file must be text, got {type(text).__name__}")
    if size > max_bytes:
        raise ProtocolError.single(
            "", f"the job file is {size} bytes, more than the limit of {max_bytes}"
        )
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ProtocolError.single(
                "", f"the job file is not UTF-8 text (bad byte at offset {exc.start})"
            ) from None
    text = text.removeprefix("\ufeff")
    if not text or text.isspace():  # as ``not text.strip()``, without copying the text
        raise ProtocolError.single("", "the job file is empty")
    return text


def parse_text(text: str | bytes, max_bytes: int = MAX_JOB_BYTES) -> tuple[object, str]:
    """``(document, syntax)`` where syntax is "json" or "yaml"; raises ProtocolError only."""
    source = decode(text, max_bytes)
    if _STRICT_JSON.match(source):
        return _parse_json(source), "json"
    if _BRACE_FIRST.match(source):
        try:
            return _parse_json(source), "json"
        except ProtocolError as json_error:
            try:
                return _parse_yaml(source), "yaml"
            except ProtocolError:
                raise json_error from None
    return _parse_yaml(source), "yaml"


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _parse_json(source: str) -> object:
    blanked = _LINE_COMMENT.sub(lambda m: " " * len(m.group(0)), source)
    try:
        return json.loads(blanked, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise ProtocolError.single(
            "", f"JSON syntax error at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        raise ProtocolError.single("", "JSON error: the document is nested too deeply") from None
    except ValueError as exc:  # duplicate keys, integers too long to convert
        raise ProtocolError.single("", f"JSON error: {_first_line(exc)}") from None


def libyaml_agrees(source: str) -> bool:
    """Whether libyaml reads ``source`` as PyYAML does: none of the characters the two read
    differently, and no tag (an empty scalar tagged ``!`` is '' to libyaml, null to PyYAML)."""
    return "!" not in source and sure_characters(source)


def sure_characters(text: str) -> bool:
    """Whether ``text`` has none of the characters YAML parsers read differently (tabs,
    carriage returns, line breaks of YAML 1.1 only, what PyYAML's reader refuses)."""
    if text.isascii():  # the common case, much faster than isprintable
        return not text.encode("ascii").translate(None, _ASCII_SURE)
    return text.replace("\n", "").isprintable() or not _UNSURE_CHARS.search(text)


def _parse_yaml(source: str) -> object:
    nesting = source.count("\n") + source.count("[") + source.count("{")
    if nesting < _C_MAX_NESTING and libyaml_agrees(source):
        try:
            return yaml.load(source, Loader=_CLoader)  # noqa: S506 - a SafeLoader
        except Exception:  # noqa: S110 - _Loader says what is wrong, in the words users see
            pass
    try:
        return yaml.load(source, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        if mark is None:
            raise ProtocolError.single("", f"YAML syntax error: {problem}") from None
        raise ProtocolError.single(
            "", f"YAML syntax error at line {mark.line + 1}, column {mark.column + 1}: {problem}"
        ) from None
    except RecursionError:
        raise ProtocolError.single("", "YAML error: the document is nested too deeply") from None
    except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
        raise ProtocolError.single("", f"YAML error: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__
