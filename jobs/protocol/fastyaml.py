"""A fast path for YAML job files: rapidyaml parses, this module builds PyYAML's result.

rapidyaml (C++, about 20x faster than libyaml through PyYAML) gives a tree of raw scalars
and their styles; plain scalars are resolved here with PyYAML's own YAML 1.1 implicit
resolvers and constructors, so the data is what ``yaml.safe_load`` (with the loader of
``parse.py``) would build: ``yes`` is True, ``1.10`` is a float that remembers its spelling.

The fast path only vouches for the common case. For anything else it raises ``Unsupported``
and the caller parses again with PyYAML, which gives the exact result or error (with line and
column): text rapidyaml refuses, tags, anchors and aliases, merge keys, duplicate keys, keys
that are not scalars, several documents, directives other than a first ``%YAML 1.x``, deep
nesting, explicit ``? `` keys, quoted or long keys, flow collections (``[a, b]``, ``{a: b}``:
PyYAML is stricter there), odd block scalar headers (a `` | `` or `` > `` in a command
counts), characters PyYAML refuses or reads as line breaks where YAML 1.2 does not.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from jobs.protocol.errors import Where

try:
    import ryml
except ImportError:  # pragma: no cover - the dependency is declared; PyYAML alone still works
    ryml = None

MAX_DEPTH = 100  # deeper documents go to PyYAML (to_plain refuses them after 64 levels)
MAX_PLAIN_DEPTH = 60  # deeper, or with more nodes, to_plain checks the data (load_noting)
MAX_PLAIN_NODES = 100_000
_SMALL = 2**256  # to_plain's bound on ints

# What PyYAML's reader refuses, plus what YAML 1.1 reads as a line break (or BOM) and YAML 1.2
# does not; tabs and carriage returns, which the two read differently in corner cases. (Text
# that ``str.isprintable`` passes, once without its newlines, has none of them: a fast test.)
_UNSURE_CHARS = re.compile(
    "[^\n\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]"
)
# What may follow the | or > of a block scalar: at most one chomping and one indentation (1-9)
# indicator, then a comment or nothing. rapidyaml lets through some headers PyYAML refuses.
_ASCII_SURE = bytes(range(0x20, 0x7F)) + b"\n"  # _UNSURE_CHARS's complement, in ASCII
_BLOCK_HEADER = re.compile(r"(?:[-+][1-9]?|[1-9][-+]?)?(?:[ ]+#[^\n]*|[ ]*)(?:\n|\Z)")
_EXPLICIT_KEY = re.compile(r"^[ -]*\?(?:[ ]|$)", re.MULTILINE)  # rapidyaml is laxer after one
_YAML_DIRECTIVE = re.compile(r"%YAML[ ]+1\.[0-9]+[ ]*(?:#[^\n]*)?\n")


class Unsupported(Exception):
    """The fast path cannot vouch for this text: parse it with PyYAML."""


def load(text: str, loader: yaml.SafeLoader) -> Any:
    """What ``yaml.load(text, Loader=type(loader))`` returns; raises Unsupported when unsure.

    ``loader`` lends its resolvers and scalar constructors (which keep no state).
    """
    return load_noting(text, loader)[0]


Found = tuple[Any, Any, Where]  # (container, key or index, where): a value to look at


def load_noting(text: str, loader: yaml.SafeLoader) -> tuple[Any, list[Found] | None]:
    """``load``'s data, and where it has a resolved value other than a string, boolean, null
    or small int (a float, a date, a big int): the only values ``plain.to_plain`` might change
    or refuse. None instead when to_plain must look at it all (odd keys, nesting, size)."""
    if ryml is None or None in loader.yaml_implicit_resolvers or not sure_characters(text):
        raise Unsupported
    if (text.startswith("%") or "\n%" in text) and not _only_a_yaml_directive(text):
        raise Unsupported
    if text.startswith("...") or "\n..." in text:  # rapidyaml ignores what follows a "..."
        raise Unsupported
    if "?" in text and _EXPLICIT_KEY.search(text):
        raise Unsupported
    if ("|" in text or ">" in text) and (not text.endswith("\n") or _odd_block(text)):
        raise Unsupported  # at the very end a block scalar's last line break differs
    tree = ryml.Tree()
    try:
        ryml.parse_in_arena(text, tree)
    except Exception:  # rapidyaml's parse errors; PyYAML says where and why
        raise Unsupported from None
    handle = tree.this
    root = tree.root_id()
    kind = _TYPE(handle, root)
    if kind & _STREAM_ONLY:
        if _NUM_CHILDREN(handle, root) != 1:
            raise Unsupported
        root = _FIRST_CHILD(handle, root)
        kind = _TYPE(handle, root)
    if kind & _KEY or not kind & (_MAP | _SEQ | _VAL):
        raise Unsupported
    builder = _Builder(handle, loader)
    try:
        data = builder.node(root, kind, 0, "")
    except UnicodeDecodeError:  # an escaped lone surrogate ("\ud800"): PyYAML makes it a str
        raise Unsupported from None
    plain = builder.plain and _SIZE(handle) < MAX_PLAIN_NODES
    return data, builder.found if plain else None


def sure_characters(text: str) -> bool:
    """Whether ``text`` has none of the characters YAML parsers read differently (tabs,
    carriage returns, line breaks of YAML 1.1 only, what PyYAML's reader refuses)."""
    if text.isascii():  # the common case, much faster than isprintable
        return not text.encode("ascii").translate(None, _ASCII_SURE)
    return text.replace("\n", "").isprintable() or not _UNSURE_CHARS.search(text)


class _Builder:
    """Turns one rapidyaml tree into Python data, the way PyYAML's safe loader would."""

    def __init__(self, handle: Any, loader: yaml.SafeLoader) -> None:
        self.handle = handle
        self.loader = loader
        self.resolvers: dict[Any, list[tuple[str, re.Pattern[str]]]]
        self.resolvers = loader.yaml_implicit_resolvers
        self.words, self.firsts = _lookups(loader)
        self.found: list[Found] = []
        self.plain = True  # no resolved key, no deep nesting: see load_noting
        # With YAML 1.1's own resolvers and int constructor, ASCII digits (no leading zero)
        # are an int: the float and timestamp patterns tried first need a "." or a "-".
        self.digits = (
            self.resolvers is yaml.resolver.Resolver.yaml_implicit_resolvers
            and loader.yaml_constructors.get(_INT) is _CONSTRUCT_INT
        )

    def node(self, node: int, kind: int, depth: int, where: Where) -> Any:
        if kind & _REJECT or depth > MAX_DEPTH:
            raise Unsupported
        if depth >= MAX_PLAIN_DEPTH:
            self.plain = False
        handle, words, firsts, digits = self.handle, self.words, self.firsts, self.digits
        type_of, next_sibling, val_text = _TYPE, _NEXT_SIBLING, _VAL_TEXT
        if kind & _MAP:
            result: dict[Any, Any] = {}
            key_text = _KEY_TEXT
            child = _FIRST_CHILD(handle, node)
            while child != _NONE:
                kind = type_of(handle, child)
                raw = key_text(handle, child)
                if raw is None:  # "? " or ":" with no key: PyYAML may refuse it
                    raise Unsupported
                key: Any = raw.tobytes().decode()
                if kind & _PAIR_CHECK == _VAL and len(raw) <= 1000:  # plain key, plain value
                    first = key[:1]
                    if first in firsts or key in words:  # maybe not a string, or refused
                        key = self.key(key, first)
                    if key in result:  # PyYAML's loader says where
                        raise Unsupported
                    raw = val_text(handle, child)
                    value: Any = "" if raw is None else raw.tobytes().decode()
                    first = value[:1]
                    if first in firsts or value in words:
                        small = len(value) <= 70 and value.isdigit() and value.isascii()
                        if digits and small and first != "0":  # resolve's first case: an int
                            value = int(value)  # (of at most 70 digits: to_plain keeps it)
                        else:
                            value = self.resolve_plain(value, first)
                            if value.__class__ is not str and not _kept(value):
                                self.found.append((result, key, (where, key)))
                    result[key] = value
                    child = next_sibling(handle, child)
                    continue
                first = key[:1]
                # PyYAML refuses a key over 1024 characters or lines, which rapidyaml may pass
                # (a quoted key may hide its line breaks): those go to PyYAML, as odd keys do.
                if kind & _KEY_STYLED or len(raw) > 1000:
                    raise Unsupported
                if first in firsts or key in words:
                    key = self.key(key, first)
                if key in result:
                    raise Unsupported
                if kind & _CONTAINER:
                    result[key] = self.node(child, kind, depth + 1, (where, key))
                else:
                    value = self.scalar(child, kind)
                    if value.__class__ is not str and not _kept(value):
                        self.found.append((result, key, (where, key)))
                    result[key] = value
                child = next_sibling(handle, child)
            return result
        if kind & _SEQ:
            items: list[Any] = []
            child = _FIRST_CHILD(handle, node)
            while child != _NONE:
                kind = type_of(handle, child)
                if kind & _CONTAINER:
                    items.append(self.node(child, kind, depth + 1, (where, len(items))))
                else:
                    value = self.scalar(child, kind)
                    if value.__class__ is not str and not _kept(value):
                        self.found.append((items, len(items), (where, len(items))))
                    items.append(value)
                child = next_sibling(handle, child)
            return items
        value = self.scalar(node, kind)
        if value.__class__ is not str and not _kept(value):
            self.plain = False
        return value

    def key(self, key: str, first: str) -> Any:
        """A plain key that may be refused or resolved (``first``: its first character)."""
        if first in _INDICATORS:
            raise Unsupported
        key = self.resolve(key)
        self.plain = self.plain and key.__class__ is str
        return key

    def scalar(self, node: int, kind: int) -> Any:
        if kind & _SCALAR_CHECK != _VAL:
            raise Unsupported
        raw = _VAL_TEXT(self.handle, node)
        value = "" if raw is None else raw.tobytes().decode()
        if kind & _VAL_STYLED:  # quoted or a block: a string
            return value
        first = value[:1]
        if first in self.firsts or value in self.words:
            return self.resolve_plain(value, first)
        return value  # no implicit type could match: a string

    def resolve_plain(self, value: str, first: str) -> Any:
        """A plain scalar whose first character is ``first``: refused when no plain scalar
        starts with it (rapidyaml lets some through that PyYAML refuses), else resolved."""
        if first in _INDICATORS:
            raise Unsupported
        return self.resolve(value)

    def resolve(self, value: str) -> Any:
        """A plain scalar as PyYAML reads it (its implicit resolvers, then constructors)."""
        if self.digits and value.isdigit() and value.isascii():
            if value[0] != "0":
                return int(value)
            if value == "0":
                return 0
        for tag, pattern in self.resolvers[value[:1]]:
            if pattern.match(value):
                if tag == _INT and value.isascii() and value.isdigit() and value[0] != "0":
                    return int(value)
                if tag not in _SCALAR_TAGS:  # "<<" (merge keys) and "=" (YAML's value key)
                    raise Unsupported
                loader = self.loader
                return loader.yaml_constructors[tag](loader, yaml.ScalarNode(tag, value))
        return value


def _kept(value: object) -> bool:
    """A resolved value that ``plain.to_plain`` keeps as it is."""
    kind = value.__class__
    return kind is bool or value is None or (kind is int and -_SMALL < value < _SMALL)  # type: ignore[operator]


_LOOKUPS: dict[type, tuple[frozenset[str], frozenset[str]]] = {}


def _lookups(loader: yaml.SafeLoader) -> tuple[frozenset[str], frozenset[str]]:
    """``(words, firsts)``: which plain scalars ``loader`` may not take as strings.

    YAML 1.1's implicit types that start with a letter are words (booleans such as ``yes``
    and ``Off``, and ``null``): a plain scalar starting with a letter that is none of them
    is a string, with no regular expression tried. The words are checked against the resolvers
    themselves; resolvers for any first character (``None``) send the text to PyYAML.
    ``firsts`` are the other first characters to look at: those of the resolvers that are not
    letters (digits, signs, ``.``, ``~``...) and the indicators no plain scalar starts with.
    """
    found = _LOOKUPS.get(type(loader))
    if found is None:
        resolvers = loader.yaml_implicit_resolvers
        candidates = {
            spelling
            for word in (*yaml.constructor.SafeConstructor.bool_values, "null")
            for spelling in (word, word.capitalize(), word.upper())
        }
        words = frozenset(
            word
            for word in candidates
            if any(pattern.match(word) for _tag, pattern in resolvers.get(word[0], []))
        )
        signs = {first for first in resolvers if isinstance(first, str) and not first.isalpha()}
        found = words, _INDICATORS | signs
        _LOOKUPS[type(loader)] = found
    return found


def _odd_block(text: str) -> bool:
    """A | or > after a space or at a line start that is no plain block scalar header (which
    may be a pipe in a command: the text then goes to PyYAML, to be safe)."""
    for mark in "|>":
        at = text.find(mark)
        while at != -1:
            if (at == 0 or text[at - 1] in " \n") and not _BLOCK_HEADER.match(text, at + 1):
                return True
            at = text.find(mark, at + 1)
    return False


def _only_a_yaml_directive(text: str) -> bool:
    first = _YAML_DIRECTIVE.match(text)
    return first is not None and text.find("\n%", first.end() - 1) == -1


_INT = "tag:yaml.org,2002:int"
_CONSTRUCT_INT = yaml.constructor.SafeConstructor.construct_yaml_int
_INDICATORS = frozenset(",[]{}#&*!|>'\"%@`")  # no plain scalar starts with one
_SCALAR_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}" for name in ("null", "bool", "int", "float", "timestamp")
)

if ryml is not None:
    _api = ryml._ryml
    _TYPE = _api.Tree_type
    _FIRST_CHILD = _api.Tree_first_child
    _NEXT_SIBLING = _api.Tree_next_sibling
    _NUM_CHILDREN = _api.Tree_num_children
    _SIZE = _api.Tree_size
    _KEY_TEXT = _api.Tree_key
    _VAL_TEXT = _api.Tree_val
    _NONE = ryml.NONE
    _KEY, _VAL, _MAP, _SEQ = ryml.KEY, ryml.VAL, ryml.MAP, ryml.SEQ
    _CONTAINER = ryml.MAP | ryml.SEQ
    _STREAM_ONLY = ryml.STREAM & ~ryml.SEQ  # STREAM is a flag plus SEQ
    _KEY_STYLED = ryml.KEY_STYLE & ~ryml.KEY_PLAIN  # quoted, literal or folded
    _VAL_STYLED = ryml.VAL_STYLE & ~ryml.VAL_PLAIN
    _REJECT = (
        ryml.KEYTAG | ryml.VALTAG | ryml.KEYANCH | ryml.VALANCH | ryml.KEYREF | ryml.VALREF
    ) | (ryml.KEY_UNFILT | ryml.VAL_UNFILT | ryml.FLOW_SL | ryml.FLOW_ML)
    _SCALAR_CHECK = _REJECT | _VAL  # a scalar has VAL and nothing of _REJECT
    # A pair with a plain key and a plain scalar value has VAL and nothing else of these.
    _PAIR_CHECK = _SCALAR_CHECK | _CONTAINER | _KEY_STYLED | _VAL_STYLED
