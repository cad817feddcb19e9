"""Our accept/reject against OpenPAI's published v2 rules, on generated jobs.

``openpai_v2_rules.yaml`` holds OpenPAI's rules as a JSON Schema (written for this project
from microsoft/openpai-protocol's ``schemas/v2/schema.yaml`` and microsoft/pai's
``protocol.js``; nothing is fetched). Each generated job is a valid job with one field
changed. Where the two disagree, the difference must be one named below, with the seed's rule
that explains it: ``STRICTER`` (we refuse, the schema cannot say why: each of our messages
must match one) and ``LOOSER`` (we accept what the schema refuses, because a seed allows it).
"""

# ruff: noqa: E501 - the tables of differences read best one a line
from __future__ import annotations

import copy
import re
import string
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protocol_samples import V2_JOB

from jobs.protocol import ProtocolError, normalise

RULES = yaml.safe_load((Path(__file__).parent / "openpai_v2_rules.yaml").read_text())
OPENPAI = jsonschema.Draft7Validator(RULES)
DELETE = object()

# (name, the seed's rule that explains it, a pattern every such message of ours matches)
STRICTER = [
    ("counts_have_minimums", "seed 000: instances and port counts 'no less than 1', completion counts '-1 or no less than 1' and at most the instances; CPU and memory at least 1, GPUs at least 0 (a count of the resource)", r"^must be (-1 or )?an integer >= \d+, got -?\d+$|^must not be more than instances"),
    ("counts_fit_32_bits", "seed 000: counts are Integer (a 32-bit one in OpenPAI's framework spec)", r"^must be an integer <= 2147483647"),
    ("shm_within_memory", "OpenPAI's rest-server: /dev/shm is part of the memory, shmMB at most memoryMB", r"^must not be more than memoryMB"),
    ("references_name_something", "seed 000: <% $parameters.x %>, <% $data.uri[0] %>... reference what the job defines; a tag is closed", r"unknown reference|malformed reference|without its closing"),
    ("selections_name_a_prerequisite", "seed 000: dockerImage 'Should reference to a dockerimage defined in prerequisites'; data, output, script select ones defined there", r"^no prerequisite named|prerequisite, not a"),
    ("prerequisite_names_are_unique", "seed 000: a task role selects a prerequisite by its name", r"^duplicate prerequisite name"),
    ("default_deployment_exists", "seed 000: defaults.deployment 'Should reference to deployment defined in deployments'", r"^no deployment named"),
    ("no_blank_image_or_cluster", "seed 000: a dockerimage's uri is required (a blank one names no image); a virtual cluster is named", r"^must not be empty$"),
]  # fmt: skip

# (name, the seed's rule that explains it, (path, value) -> whether it applies)
LOOSER = [
    ("uri_optional_outside_docker_images", "seed 001: 'uri: string | array # optional, for backward compatibility'", lambda path, value: path in ("prerequisites[1].uri", "prerequisites[3].uri") and value is DELETE),
    ("data_uri_may_be_one_string", "seed 001: 'uri: string | array' (a data prerequisite with one URI)", lambda path, value: path == "prerequisites[1].uri" and isinstance(value, str)),
    ("seed_001_keys_on_a_docker_image", "seed 001: plugin, require, callbacks, failurePolicy on every prerequisite", lambda path, value: path == "prerequisites[0].plugin" and isinstance(value, str)),
]  # fmt: skip

BASE = copy.deepcopy(V2_JOB)
BASE["taskRoles"]["worker"]["completion"] = {"minFailedInstances": 1, "minSucceededInstances": 2}
BASE["taskRoles"]["worker"]["extraContainerOptions"] = {"shmMB": 64, "infiniband": False}
BASE["prerequisites"][0]["auth"] = {"username": "u", "password": "<% $secrets.token %>"}

ROLE = "taskRoles.worker."
PATHS = [
    "protocolVersion", "name", "type", "version", "contributor", "jobRetryCount", "parameters",
    "extras", "unknownField", "defaults.virtualCluster", "defaults.deployment", "defaults.other",
    ROLE + "instances", ROLE + "taskRetryCount", ROLE + "protocolVersion", ROLE + "dockerImage",
    ROLE + "data", ROLE + "completion.minFailedInstances",
    ROLE + "completion.minSucceededInstances",
    ROLE + "resourcePerInstance.cpu", ROLE + "resourcePerInstance.memoryMB",
    ROLE + "resourcePerInstance.gpu", ROLE + "resourcePerInstance.ports.ssh",
    ROLE + "extraContainerOptions.shmMB", ROLE + "extraContainerOptions.infiniband",
    ROLE + "commands", ROLE + "commands[0]", ROLE + "unknownField",
    "prerequisites[0].name", "prerequisites[0].uri", "prerequisites[0].tag",
    "prerequisites[0].plugin", "prerequisites[0].auth", "prerequisites[0].auth.email",
    "prerequisites[1].uri", "prerequisites[3].uri", "prerequisites[3].version",
    "prerequisites[3].name",
]  # fmt: skip
VALUES = st.one_of(
    st.sampled_from(
        [
            DELETE,
            None,
            True,
            0,
            1,
            2,
            3,
            -1,
            -2,
            1.0,
            2.0,
            1.5,
            2**31,
            "",
            " ",
            "2",
            "a b",
            "image",
            "<% oops",
            "<% $parameters.model %>",
            [],
            ["x"],
            [1],
            {},
            {"k": "v"},
        ]
    ),  # fmt: skip
    st.integers(-3, 5000),
    st.text(alphabet=string.ascii_letters + string.digits + "_-. <%$", max_size=8),
)
_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def mutated(path: str, value: object) -> dict[str, Any]:
    document = copy.deepcopy(BASE)
    keys: list[Any] = [k if k else int(i) for k, i in _STEP.findall(path)]
    target: Any = document
    for key in keys[:-1]:
        target = target[key]
    if value is DELETE:
        target.pop(keys[-1], None) if isinstance(target, dict) else target.pop(keys[-1])
    else:
        target[keys[-1]] = value
    return document


def our_messages(document: dict[str, Any]) -> list[str] | None:
    """None when we accept the job, else our messages."""
    try:
        normalise(document)
    except ProtocolError as error:
        return [issue.message for issue in error.issues]
    return None


def test_the_base_job_is_accepted_by_both() -> None:
    assert our_messages(BASE) is None and OPENPAI.is_valid(BASE)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(PATHS), value=VALUES)
def test_we_accept_what_openpai_accepts_but_for_the_named_differences(
    path: str, value: object
) -> None:
    document = mutated(path, value)
    refused = our_messages(document)
    openpai_errors = [error.message for error in OPENPAI.iter_errors(document)]
    if (refused is None) == (not openpai_errors):
        return
    if refused is None:
        named = [name for name, _, applies in LOOSER if applies(path, value)]
        assert named, f"{path}={value!r}: accepted here, OpenPAI refuses: {openpai_errors}"
    else:
        for message in refused:
            named = [name for name, _, pattern in STRICTER if re.search(pattern, message)]
            assert named, f"{path}={value!r}: refused here ({message}), OpenPAI accepts"


def test_each_named_difference_says_its_seed_rule() -> None:
    for name, rule, _ in [*STRICTER, *LOOSER]:
        assert re.fullmatch(r"[a-z0-9_]+", name) and ("seed" in rule or "OpenPAI" in rule)
