"""Reading job text: sizes, encodings, syntax errors with line and column, unsafe YAML."""

from __future__ import annotations

import json

import pytest
import yaml
from protocol_samples import V2_JOB

from protocol import MAX_JOB_BYTES, ProtocolError, load_job


def message_of(text: str | bytes) -> str:
    with pytest.raises(ProtocolError) as caught:
        load_job(text)
    return str(caught.value)


def test_an_empty_file_is_refused() -> None:
    assert message_of("  \n") == "the job file is empty"


def test_bytes_that_are_not_utf8_are_refused() -> None:
    assert message_of(b"name: \xff\xfe") == "the job file is not UTF-8 text (bad byte at offset 6)"


def test_a_file_over_the_size_limit_is_refused() -> None:
    text = "x" * (MAX_JOB_BYTES + 1)
    assert message_of(text) == (
        f"the job file is {MAX_JOB_BYTES + 1} bytes, more than the limit of {MAX_JOB_BYTES}"
    )


def test_a_yaml_syntax_error_names_line_and_column() -> None:
    assert message_of("name: a\ntaskRoles: [1\n") == (
        "YAML syntax error at line 3, column 1: expected ',' or ']', but got '<stream end>'"
    )


def test_a_json_syntax_error_names_line_and_column() -> None:
    assert message_of('{\n  "jobName": "a",\n  "image": }') == (
        "JSON syntax error at line 3, column 12: Expecting value"
    )


def test_a_yaml_scalar_is_not_a_job() -> None:
    assert message_of("hello") == 'a job must be an object (a mapping of fields), got "hello"'


def test_a_yaml_list_is_not_a_job() -> None:
    assert message_of("- a\n- b\n") == "a job must be an object (a mapping of fields), got a list"


def test_python_tags_are_refused_not_executed() -> None:
    text = "!!python/object/apply:os.system ['echo hacked']"
    assert "could not determine a constructor" in message_of(text)


def test_an_alias_bomb_is_refused_quickly() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    assert "too big once expanded" in message_of("\n".join(lines))


def test_deeply_nested_json_is_refused() -> None:
    assert "nested" in message_of("[" * 100_000 + "]" * 100_000)


def test_deeply_nested_yaml_is_refused() -> None:
    assert "nested" in message_of("a: " + "[" * 5000 + "]" * 5000)


def test_an_integer_too_long_to_read_is_refused() -> None:
    assert message_of('{"jobName": ' + "9" * 5000 + "}").startswith("JSON error:")


def test_a_duplicate_yaml_key_is_refused_with_its_line() -> None:
    assert message_of("name: a\nname: b\n") == (
        "YAML syntax error at line 2, column 1: duplicate key 'name'"
    )


def test_a_duplicate_json_key_is_refused() -> None:
    assert message_of('{"name": "a", "name": "b"}') == "JSON error: duplicate key 'name'"


def test_nan_is_not_json_data() -> None:
    text = json.dumps({**V2_JOB, "parameters": {"lr": float("nan")}})
    assert message_of(text) == "parameters.lr: must be a finite number, got nan"


def test_a_key_that_is_not_a_string_is_refused() -> None:
    assert message_of("name: a\n1: b\n") == "keys must be strings, got 1"


def test_yaml_dates_become_iso_strings() -> None:
    text = yaml.safe_dump(V2_JOB, sort_keys=False).replace("epochs: 3", "day: 2024-01-31")
    job = load_job(text).job
    assert job["parameters"]["day"] == "2024-01-31"


def test_a_v2_job_may_be_written_in_json() -> None:
    loaded = load_job(json.dumps(V2_JOB).encode())
    assert loaded.source_format == "v2" and loaded.job["name"] == "demo"


def test_a_utf8_byte_order_mark_is_ignored() -> None:
    assert load_job(b"\xef\xbb\xbf" + json.dumps(V2_JOB).encode()).job["name"] == "demo"


def test_anything_but_text_is_refused() -> None:
    assert message_of(123) == "a job file must be text, got int"  # type: ignore[arg-type]
