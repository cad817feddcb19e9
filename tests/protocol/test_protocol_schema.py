"""The JSON Schema of the v2 format agrees with load_job on the examples."""

from __future__ import annotations

import jsonschema
import pytest
import yaml
from protocol_samples import EXAMPLES, V2_JOB

from protocol import json_schema, load_job

V2_FILES = sorted(p.name for p in EXAMPLES.iterdir() if p.suffix == ".yaml")


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    schema = json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("name", V2_FILES)
def test_each_v2_seed_example_matches_the_schema(name: str) -> None:
    jsonschema.validate(yaml.safe_load((EXAMPLES / name).read_text()), json_schema())


@pytest.mark.parametrize("name", V2_FILES)
def test_the_canonical_form_of_each_v2_seed_example_matches_the_schema(name: str) -> None:
    jsonschema.validate(load_job((EXAMPLES / name).read_text()).job, json_schema())


def test_the_schema_refuses_a_gpu_count_given_as_text() -> None:
    job = yaml.safe_load(yaml.safe_dump(V2_JOB))
    job["taskRoles"]["worker"]["resourcePerInstance"]["gpu"] = "four"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(job, json_schema())


def test_each_call_returns_a_fresh_schema() -> None:
    json_schema()["title"] = "changed"
    assert json_schema()["title"] == "OpenPAI job protocol v2"
