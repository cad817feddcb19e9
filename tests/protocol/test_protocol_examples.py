"""Every job example of the seed documents loads, normalises and survives an export."""

from __future__ import annotations

import json

import pytest
from protocol_samples import EXAMPLES

from protocol import dump_yaml, load_job, render_role

FILES = sorted(p.name for p in EXAMPLES.iterdir())


def test_there_is_an_example_from_every_seed_document() -> None:
    assert {name[:3] for name in FILES} == {"000", "001", "002", "003", "004"}


@pytest.mark.parametrize("name", FILES)
def test_each_seed_example_loads_into_a_json_serialisable_canonical_job(name: str) -> None:
    loaded = load_job((EXAMPLES / name).read_bytes())
    assert json.loads(json.dumps(loaded.job)) == loaded.job
    assert loaded.job["protocolVersion"] == 2 and loaded.job["type"] == "job"


@pytest.mark.parametrize("name", FILES)
def test_each_seed_example_survives_a_yaml_export_unchanged(name: str) -> None:
    job = load_job((EXAMPLES / name).read_bytes()).job
    assert load_job(dump_yaml(job)).job == job


@pytest.mark.parametrize("name", FILES)
def test_every_role_of_each_seed_example_renders(name: str) -> None:
    job = load_job((EXAMPLES / name).read_bytes()).job
    for role in job["taskRoles"]:
        rendered = render_role(job, role)
        assert not any("<%" in c for c in rendered.commands + rendered.pre_commands)


def test_json_examples_are_v1_and_yaml_examples_are_v2() -> None:
    for name in FILES:
        expected = "v1" if name.endswith(".json") else "v2"
        assert load_job((EXAMPLES / name).read_bytes()).source_format == expected


def test_the_tensorflow_example_keeps_its_roles_in_order_with_their_resources() -> None:
    job = load_job((EXAMPLES / "000_tensorflow_cifar10.yaml").read_text()).job
    assert list(job["taskRoles"]) == ["worker", "ps_server"]
    worker = job["taskRoles"]["worker"]
    assert worker["resourcePerInstance"] == {
        "cpu": 2,
        "memoryMB": 16384,
        "gpu": 4,
        "ports": {"ssh": 1, "http": 1},
    }
    assert job["taskRoles"]["ps_server"]["completion"] == {
        "minFailedInstances": 1,
        "minSucceededInstances": -1,
    }


def test_a_yaml_version_written_as_a_number_becomes_the_string_written() -> None:
    job = load_job((EXAMPLES / "000_tensorflow_cifar10.yaml").read_text()).job
    assert job["version"] == "1.0"
    assert job["deployments"][0]["version"] == "1.0"


def test_the_seed_002_examples_warn_about_tmp_and_storage_gb() -> None:
    loaded = load_job((EXAMPLES / "002_helloworld.json").read_text())
    assert loaded.warnings == [
        "tmp: not a field of the v1 job format; kept in extras.v1.ignored",
        "taskRoles[0].storageGB: not a field of the v1 job format; kept in extras.v1.ignored",
    ]
    ignored = loaded.job["extras"]["v1"]["ignored"]
    assert ignored["taskRoles[0].storageGB"] == 5
    assert ignored["tmp"]["vgInfo"]["显示卡(使用中/全部)"] == {"TITANX": "0/2", "P100": "0/2"}


def test_the_seed_003_example_loads_despite_its_line_comments() -> None:
    job = load_job((EXAMPLES / "003_tensorflow_distributed.json").read_text()).job
    assert list(job["taskRoles"]) == ["ps_server", "worker"]
    assert job["extras"]["v1"]["killAllOnCompletedTaskNumber"] == 2
    assert job["defaults"] == {"virtualCluster": "your_virtual_cluster"}


def test_a_role_named_taskrole_1_keeps_its_name() -> None:
    job = load_job((EXAMPLES / "004_taskrole_1.yaml").read_text()).job
    assert list(job["taskRoles"]) == ["taskrole", "taskrole_1"]
    assert job["taskRoles"]["taskrole_1"]["completion"]["minSucceededInstances"] == 1
