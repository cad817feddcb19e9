"""One source of truth: every job the validator accepts, once normalised, matches the JSON
Schema the API publishes (``/api/v2/job-protocol/schema.json``)."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protocol_samples import EXAMPLES, V1_JOB, V2_JOB, changed, places

from protocol import ProtocolError, json_schema, load_job, normalise
from protocol.parse import parse_text

SCHEMA = jsonschema.Draft202012Validator(json_schema())
MANY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

V1_NAMES = st.from_regex(r"\A[A-Za-z0-9\-._~]{1,20}\Z")
V1_ROLES = st.from_regex(r"\A[A-Za-z0-9._~]{1,12}\Z")
V2_NAMES = st.from_regex(r"\A[a-zA-Z0-9_-]{1,20}\Z")
C_NAMES = st.from_regex(r"\A[a-zA-Z_][a-zA-Z0-9_]{0,11}\Z")
# Mostly valid, so that most generated jobs are accepted and checked against the schema.
COUNTS = st.integers(min_value=1, max_value=4)
GPUS = st.integers(min_value=0, max_value=2)
RETRIES = st.integers(min_value=0, max_value=3)
MIN_COUNTS = st.none() | st.sampled_from([-1, 1])
TEXT = st.text(max_size=12)
# What a replaced value may be: the kinds of values jobs hold, odd names included.
VALUES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-2, max_value=8)
    | st.floats(allow_nan=False, allow_infinity=False, min_value=-4, max_value=8)
    | TEXT
    | V1_NAMES
    | st.lists(TEXT, max_size=3)
    | st.dictionaries(C_NAMES | V1_ROLES, COUNTS | TEXT, max_size=3)
)


def assert_matches_the_schema(job: dict[str, Any]) -> None:
    """If the validator accepts ``job``, its canonical form matches the published schema."""
    try:
        canonical = normalise(job).job
    except ProtocolError:
        return
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in SCHEMA.iter_errors(canonical)]
    assert not errors, (json.dumps(job), errors)


def v1_role(name: str, count: int, cpu: int, memory: int, gpu: int, labels: list[str]) -> dict:
    ports = [{"label": label, "beginAt": 0, "portNumber": 1} for label in labels]
    return {
        "name": name,
        "taskNumber": count,
        "cpuNumber": cpu,
        "memoryMB": memory,
        "gpuNumber": gpu,
        "command": "echo hi",
        "portList": ports,
    }


V1_ROLE = st.builds(
    v1_role, V1_ROLES, COUNTS, COUNTS, st.sampled_from([100, 256]), GPUS,
    st.lists(V1_ROLES, max_size=2, unique=True),
)  # fmt: skip


@MANY
@given(
    name=V1_NAMES,
    roles=st.lists(V1_ROLE, min_size=1, max_size=3, unique_by=lambda role: role["name"]),
    retries=st.none() | RETRIES,
    min_failed=MIN_COUNTS,
    min_succeeded=MIN_COUNTS,
    environment=st.dictionaries(C_NAMES, TEXT, max_size=2),
)
def test_every_accepted_v1_job_normalises_into_the_schema(
    name: str,
    roles: list[dict[str, Any]],
    retries: int | None,
    min_failed: int | None,
    min_succeeded: int | None,
    environment: dict[str, str],
) -> None:
    roles[0]["minFailedTaskCount"] = min_failed
    roles[0]["minSucceededTaskCount"] = min_succeeded
    job: dict[str, Any] = {"jobName": name, "image": "python:3.11", "taskRoles": roles}
    if retries is not None:
        job["retryCount"] = retries
    if environment:
        job["jobEnvs"] = environment
    assert_matches_the_schema(job)


@MANY
@given(
    name=V2_NAMES,
    roles=st.dictionaries(
        C_NAMES,
        st.fixed_dictionaries(
            {
                "instances": COUNTS,
                "completion": st.fixed_dictionaries(
                    {"minFailedInstances": MIN_COUNTS, "minSucceededInstances": MIN_COUNTS}
                ),
                "taskRetryCount": RETRIES,
                "resourcePerInstance": st.fixed_dictionaries(
                    {
                        "cpu": COUNTS,
                        "memoryMB": st.sampled_from([1, 512]),
                        "gpu": GPUS,
                        "ports": st.dictionaries(C_NAMES | V1_ROLES, COUNTS, max_size=2),
                    }
                ),
                "extraContainerOptions": st.fixed_dictionaries(
                    {}, optional={"shmMB": COUNTS, "infiniband": st.booleans()}
                ),
            }
        ),
        min_size=1,
        max_size=3,
    ),
    retries=RETRIES,
    from_v1=st.booleans(),
)
def test_every_accepted_v2_job_normalises_into_the_schema(
    name: str, roles: dict[str, dict[str, Any]], retries: int, from_v1: bool
) -> None:
    for role in roles.values():
        role.update(dockerImage="image", commands=["echo hi"])
    job: dict[str, Any] = {
        "protocolVersion": 2,
        "name": name,
        "type": "job",
        "jobRetryCount": retries,
        "prerequisites": [{"name": "image", "type": "dockerimage", "uri": "python:3.11"}],
        "taskRoles": roles,
    }
    if from_v1:
        job["extras"] = {"v1": {"jobName": name}}
    assert_matches_the_schema(job)


SAMPLES = [V1_JOB, V2_JOB] + [parse_text(p.read_bytes())[0] for p in sorted(EXAMPLES.iterdir())]


@MANY
@given(st.sampled_from(SAMPLES), st.data())
def test_every_accepted_change_of_a_sample_job_normalises_into_the_schema(
    sample: dict[str, Any], data: st.DataObject
) -> None:
    path = data.draw(st.sampled_from(places(sample)))
    assert_matches_the_schema(changed(sample, path, data.draw(VALUES)))


def test_a_v1_job_with_dots_and_tildes_in_its_names_matches_the_schema() -> None:
    """The case that told the validator and the schema apart: v1 names keep their ``.``/``~``."""
    job = {
        "jobName": "tf.job~1",
        "image": "python:3.11",
        "taskRoles": [v1_role("ps.role~0", 1, 1, 256, 0, ["ssh.port~1"])],
    }
    canonical = load_job(json.dumps(job)).job
    assert canonical["name"] == "tf.job~1" and list(canonical["taskRoles"]) == ["ps.role~0"]
    SCHEMA.validate(canonical)


def test_a_v2_job_of_its_own_still_may_not_use_v1_names() -> None:
    job = copy.deepcopy(V2_JOB)
    job["name"] = "tf.job~1"
    assert not SCHEMA.is_valid(job)
    job = copy.deepcopy(V2_JOB)
    job["taskRoles"] = {"ps.role~0": job["taskRoles"]["worker"]}
    assert not SCHEMA.is_valid(job)
