"""The rapidyaml fast path reads what PyYAML writes exactly as ``yaml.safe_load`` does."""

from __future__ import annotations

import datetime
import math
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from jobs.protocol import fastyaml

LOADER = yaml.SafeLoader("")  # lends its resolvers and constructors, as parse.py's does
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
CHECK = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


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


@pytest.mark.parametrize("style", list(STYLES))
@CHECK
@given(value=VALUES)
def test_the_fast_path_reads_what_pyyaml_wrote_as_safe_load_does(style, value):
    text = yaml.safe_dump(value, **STYLES[style])
    expected = yaml.safe_load(text)
    try:
        fast = fastyaml.load(text, LOADER)
    except fastyaml.Unsupported:
        event("left to PyYAML")
        return
    event("read by rapidyaml")
    assert same(fast, expected), text


def test_the_fast_path_answers_for_a_block_style_job_file():
    job = {
        "protocolVersion": 2,
        "name": "job",
        "enabled": True,
        "ratio": 0.5,
        "since": datetime.date(2024, 1, 2),
        "taskRoles": {"main": {"instances": 1, "commands": ["echo a: b", "echo 'x'"]}},
        "empty": None,
    }
    text = yaml.safe_dump(job, default_flow_style=False)
    assert same(fastyaml.load(text, LOADER), yaml.safe_load(text))


def test_the_fast_path_and_libyaml_are_installed():
    """Both are declared dependencies: without them every job falls back to pure PyYAML."""
    assert fastyaml.ryml is not None
    assert yaml.__with_libyaml__
