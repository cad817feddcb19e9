"""Where the portal's checks differ from OpenPAI's (issue 20), each rule tested by its name.

OpenPAI's sources: its job checker (microsoft/pai ``src/rest-server/src/config/v2/protocol.js``,
``config/job.js`` for v1) and its published schema (microsoft/openpai-protocol
``schemas/v2/schema.yaml``).
"""

# ruff: noqa: E501 - the tables of cases read best one case a line
from __future__ import annotations

import pytest
from protocol_samples import V2_JOB, changed

from jobs.protocol import ProtocolError, ProtocolIssue, load_job, normalise


def issues_of(document: dict[str, object]) -> list[ProtocolIssue]:
    with pytest.raises(ProtocolError) as caught:
        normalise(document)
    return caught.value.issues


# OpenPAI reads numbers as JavaScript does: 2.0 is 2.
@pytest.mark.parametrize(
    ("path", "value", "canonical_path", "expected"),
    [
        ("taskRoles.worker.resourcePerInstance.cpu", 1.0, ("taskRoles", "worker", "resourcePerInstance", "cpu"), 1),
        ("taskRoles.worker.instances", 2.0, ("taskRoles", "worker", "instances"), 2),
        ("protocolVersion", 2.0, ("protocolVersion",), 2),
        ("jobRetryCount", 3.0, ("jobRetryCount",), 3),
        ("taskRoles.worker.resourcePerInstance.ports.ssh", 2.0, ("taskRoles", "worker", "resourcePerInstance", "ports", "ssh"), 2),
    ],
)  # fmt: skip
def test_whole_float_is_the_integer_it_equals(
    path: str, value: float, canonical_path: tuple[str, ...], expected: int
) -> None:
    found: object = normalise(changed(V2_JOB, path, value)).job
    for key in canonical_path:
        assert isinstance(found, dict)
        found = found[key]
    assert found == expected and type(found) is int


def test_whole_float_written_in_yaml_is_accepted() -> None:
    text = (
        "protocolVersion: 2.0\nname: floats\ntype: job\n"
        "prerequisites:\n  - {name: image, type: dockerimage, uri: 'ubuntu:22.04'}\n"
        "taskRoles:\n  main:\n    instances: 2.0\n    dockerImage: image\n"
        "    resourcePerInstance: {cpu: 1.0, memoryMB: 512.0, gpu: 0.0}\n"
        "    commands: [echo hi]\n"
    )
    role = load_job(text).job["taskRoles"]["main"]
    assert role["instances"] == 2 and role["resourcePerInstance"] == {
        "cpu": 1, "memoryMB": 512, "gpu": 0, "ports": {}
    }  # fmt: skip


def test_fraction_where_an_integer_is_required_is_refused() -> None:
    assert issues_of(changed(V2_JOB, "taskRoles.worker.resourcePerInstance.cpu", 1.5)) == [
        ProtocolIssue(
            "taskRoles.worker.resourcePerInstance.cpu",
            "must be a whole number (an integer), got 1.5",
        )
    ]
