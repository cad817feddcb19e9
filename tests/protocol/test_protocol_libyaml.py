"""Job files are read by libyaml (the fast path), which must agree with pure PyYAML: whenever
both read a text, they read the same data, and libyaml refuses none PyYAML reads. libyaml is
the more lenient of the two in a few corners (``{a: n?ull}``: a ``?`` inside a plain scalar in
a flow mapping); such a text is accepted, as libyaml (the reference implementation) and
OpenPAI's js-yaml accept it."""

from __future__ import annotations

import math
import os
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from protocol import parse
from protocol.errors import ProtocolError

STYLES = {
    "default": {},
    "flow": {"default_flow_style": True},
    "block": {"default_flow_style": False},
    "unicode": {"default_flow_style": False, "allow_unicode": True},
    "wide": {"default_flow_style": False, "allow_unicode": True, "width": 10_000},
}
WORDISH = st.sampled_from(
    ["yes", "No", "on", "OFF", "null", "~", "1.10", "0x1f", "0o17", "1_000", "2024-01-02",
     "-", "? x", "a: b", "# c", "|", "> x", "*a", "&a", "!t", "%x", "@", "`", "'", '"', ""]
)  # fmt: skip
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**300), max_value=2**300)
    | st.floats(allow_nan=False)
    | st.dates()
    | st.text(max_size=30)
    | st.text(alphabet=st.characters(codec="ascii"), max_size=30)
    | WORDISH
)
KEYS = st.text(max_size=12) | WORDISH | st.integers() | st.booleans()
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(KEYS, inner, max_size=5),
    max_leaves=30,
)


def same(left: Any, right: Any) -> bool:
    """Equal, with the type too (True is not 1, 1.0 is not 1), all the way down."""
    if isinstance(left, dict):
        return (
            type(right) is dict
            and list(left) == list(right)
            and all(same(k, r) for k, r in zip(left, right, strict=True))
            and all(same(left[k], right[k]) for k in left)
        )
    if isinstance(left, list):
        return type(right) is list and len(left) == len(right) and all(map(same, left, right))
    if isinstance(left, float) and isinstance(right, float):
        return left == right or (math.isnan(left) and math.isnan(right))
    return type(left) is type(right) and left == right


CHECK = settings(
    max_examples=int(os.environ.get("N", 300)),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
EDITS = st.lists(
    st.tuples(st.integers(min_value=0), st.sampled_from(list(":-?[]{},#&*!|>'\"%@` \t\n\\ax1."))),
    max_size=4,
)


def load(text: str, loader: type) -> tuple[bool, object]:
    try:
        return True, yaml.load(text, Loader=loader)  # noqa: S506 - both are safe loaders
    except Exception as exc:  # noqa: BLE001 - any refusal counts as one
        return False, type(exc).__name__


def agree(text: str) -> bool:
    """Whether libyaml reads ``text`` (False: left to PyYAML, or refused by libyaml). What both
    read is the same data, and what libyaml refuses the portal reads as PyYAML does: it falls
    back to the pure loader (libyaml refuses a few texts PyYAML reads, e.g. ``[null:, false]``,
    found by the property test below)."""
    if not parse.libyaml_agrees(text):
        event("has characters or tags the two read differently: left to PyYAML")
        return False
    read_by_c, c_data = load(text, parse._CLoader)
    read_by_py, py_data = load(text, parse._Loader)
    event(f"libyaml read it: {read_by_c}, PyYAML read it: {read_by_py}")
    if read_by_c and read_by_py:
        assert same(c_data, py_data), text
    if read_by_py and not read_by_c:
        assert same(parse.parse_text(text)[0], py_data), f"the fallback misread {text!r}"
    return read_by_c


@pytest.mark.parametrize("style", list(STYLES))
@CHECK
@given(value=VALUES)
def test_libyaml_reads_what_pyyaml_wrote_as_the_pure_loader_does(style, value):
    text = yaml.safe_dump(value, **STYLES[style])
    # What PyYAML wrote, libyaml reads (the same data as PyYAML), unless it is left to PyYAML.
    assert agree(text) or not parse.libyaml_agrees(text), text


@CHECK
@given(value=VALUES, edits=EDITS, flow=st.booleans())
def test_on_an_edited_text_libyaml_never_reads_other_data_than_pyyaml(value, edits, flow):
    text = yaml.safe_dump(value, default_flow_style=flow)
    for at, char in edits:
        at %= len(text) + 1
        text = text[:at] + char + text[at:]
    agree(text)


def test_a_text_libyaml_refuses_and_pyyaml_reads_is_read_as_pyyaml_reads_it():
    text = "[null:, false]\n"  # found by the property test above
    assert not load(text, parse._CLoader)[0]
    assert parse.parse_text(text)[0] == yaml.load(text, Loader=parse._Loader)  # noqa: S506


@pytest.mark.parametrize("text", ["a: !\n", "#[]\n!"])
def test_an_empty_scalar_tagged_with_a_lone_bang_is_null_as_pyyaml_reads_it(text):
    """libyaml reads it as '' (found by the property test above): such a text is PyYAML's."""
    assert parse.parse_text(text)[0] == yaml.load(text, Loader=parse._Loader)  # noqa: S506


FLOW_JOB = """protocolVersion: 2
name: flow
type: job
prerequisites: [{name: img, type: dockerimage, uri: python}]
taskRoles:
  worker: {instances: 2, dockerImage: img, commands: ["echo {a: b}"],
           resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0, ports: {http: 1}}}
"""


def test_a_flow_style_job_is_read_by_libyaml_not_the_pure_loader(monkeypatch):
    used = []
    real_load = yaml.load
    monkeypatch.setattr(
        yaml, "load", lambda text, Loader: used.append(Loader) or real_load(text, Loader)
    )  # noqa: E501
    document, syntax = parse.parse_text(FLOW_JOB)
    assert (used, syntax) == ([parse._CLoader], "yaml")
    assert document == real_load(FLOW_JOB, Loader=parse._Loader)


def test_an_error_is_still_told_in_pyyamls_words_with_its_line_and_column():
    with pytest.raises(ProtocolError) as caught:
        parse.parse_text(FLOW_JOB.replace("{http: 1}}}", "{http: 1}}"))
    assert "YAML syntax error at line" in str(caught.value)
    assert "column" in str(caught.value)
