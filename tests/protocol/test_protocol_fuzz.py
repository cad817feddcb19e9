"""Whatever comes in, load_job and normalise raise ProtocolError and nothing else."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protocol_samples import DELETE, EXAMPLES, V1_JOB, V2_JOB, changed, places

from protocol import (
    ProtocolError,
    dump_yaml,
    load_job,
    mask_secrets,
    normalise,
    render_callbacks,
    render_role,
)
from protocol.load import INTERNAL

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats()
    | st.text(max_size=20)
    | st.sampled_from(["2", "job", "<% $parameters.x %>", "<% %>", "data", "containerStart"])
)
JSON_LIKE = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
SEEDS = [load_job(p.read_bytes()).job for p in sorted(EXAMPLES.iterdir())]
VALID = [V2_JOB, V1_JOB, *SEEDS]


def check_only_protocol_errors(call: Any, argument: object) -> None:
    try:
        loaded = call(argument)
    except ProtocolError as exc:
        assert INTERNAL not in str(exc), str(exc)
        return
    job = loaded.job
    json.dumps(job)
    for role in job["taskRoles"]:
        render_role(job, role)
        render_callbacks(job, role)
    assert load_job(dump_yaml(job)).job == job
    mask_secrets(job)


@FAST
@given(JSON_LIKE)
def test_any_json_like_value_raises_only_protocol_error(value: object) -> None:
    check_only_protocol_errors(normalise, value)


@FAST
@given(st.text(max_size=200) | st.binary(max_size=200))
def test_any_text_raises_only_protocol_error(text: str | bytes) -> None:
    check_only_protocol_errors(load_job, text)


@FAST
@given(st.sampled_from(VALID), st.data())
def test_a_valid_job_with_one_value_replaced_raises_only_protocol_error(
    job: dict[str, Any], data: st.DataObject
) -> None:
    path = data.draw(st.sampled_from(places(job)))
    check_only_protocol_errors(normalise, changed(job, path, data.draw(JSON_LIKE)))


@FAST
@given(st.sampled_from(VALID), st.data())
def test_a_valid_job_with_one_value_removed_raises_only_protocol_error(
    job: dict[str, Any], data: st.DataObject
) -> None:
    path = data.draw(st.sampled_from(places(job)))
    check_only_protocol_errors(normalise, changed(job, path, DELETE))


@FAST
@given(st.sampled_from(VALID), st.data())
def test_a_valid_job_as_yaml_with_text_cut_short_raises_only_protocol_error(
    job: dict[str, Any], data: st.DataObject
) -> None:
    text = dump_yaml(job)
    cut = data.draw(st.integers(min_value=0, max_value=len(text)))
    check_only_protocol_errors(load_job, text[:cut])


def test_a_job_that_contains_itself_is_refused() -> None:
    document: dict[str, Any] = copy.deepcopy(V2_JOB)
    document["extras"] = {"loop": document}
    check_only_protocol_errors(normalise, document)
