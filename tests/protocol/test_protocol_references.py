"""Rendering ``<% %>`` references, masking secrets, and seed 001's callbacks."""

from __future__ import annotations

import pytest
from protocol_samples import EXAMPLES, V2_JOB, changed

from protocol import (
    SECRET_MASK,
    Callback,
    ProtocolError,
    load_job,
    mask_secrets,
    normalise,
    render_callbacks,
    render_role,
)


def job_with(path: str, value: object) -> dict[str, object]:
    return normalise(changed(V2_JOB, path, value)).job


def test_render_role_resolves_parameters_in_commands() -> None:
    assert render_role(normalise(V2_JOB).job, "worker").commands == [
        "python train.py --model resnet"
    ]


def test_render_role_gives_secrets_in_clear() -> None:
    job = job_with("taskRoles.worker.commands", ["login --token <% $secrets.token %>"])
    assert render_role(job, "worker").commands == ["login --token s3cret"]


def test_whitespace_inside_the_brackets_is_free() -> None:
    job = job_with(
        "taskRoles.worker.commands", ["<%$parameters.model%>|<%  $parameters.epochs\t%>"]
    )
    assert render_role(job, "worker").commands == ["resnet|3"]


def test_data_script_and_output_resolve_to_what_the_role_selects() -> None:
    command = (
        "<% $data.name %> <% $data.uri[1] %> <% $script.uri %> <% $script.contributor %>"
        " <% $script.version %> <% $output.uri %>"
    )
    job = job_with("taskRoles.worker.commands", [command])
    assert render_role(job, "worker").commands == [
        "mnist http://a/2 github.com/a/b alice v1 hdfs://out"
    ]


def test_the_whole_parameters_object_renders_as_json() -> None:
    job = job_with("taskRoles.worker.commands", ["echo '<% $parameters %>'"])
    assert render_role(job, "worker").commands == ["""echo '{"model":"resnet","epochs":3}'"""]


def test_the_default_deployment_supplies_pre_and_post_commands() -> None:
    rendered = render_role(normalise(V2_JOB).job, "worker")
    assert rendered.pre_commands == ["wget http://a/1"]
    assert rendered.post_commands == ["echo done"]


def test_without_a_default_deployment_there_are_no_pre_or_post_commands() -> None:
    job = job_with("defaults", {})
    rendered = render_role(job, "worker")
    assert (rendered.pre_commands, rendered.post_commands) == ([], [])


def test_an_explicit_deployment_is_used_even_without_defaults() -> None:
    job = job_with("defaults", {})
    assert render_role(job, "worker", "prod").pre_commands == ["wget http://a/1"]


def test_an_unknown_deployment_given_to_render_role_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match='deployment: no deployment named "dev"'):
        render_role(normalise(V2_JOB).job, "worker", "dev")


def test_an_unknown_role_given_to_render_role_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match='taskRoles: no task role named "ps"'):
        render_role(normalise(V2_JOB).job, "ps")


def test_the_seed_000_deployment_renders_the_github_token_in_clear() -> None:
    job = load_job((EXAMPLES / "000_tensorflow_cifar10.yaml").read_text()).job
    clone = render_role(job, "worker").pre_commands[1]
    assert clone.startswith("git clone https://MaggieQi:cGFzc3dvcmQ=@gh.neting.cc/MaggieQi/")
    assert "git checkout 84820935288cab696c9c2ac409cbd46a1f24723d" in clone


def test_mask_secrets_hides_every_secret_value() -> None:
    masked = mask_secrets(normalise(V2_JOB).job)
    assert masked["secrets"] == {"token": SECRET_MASK}


def test_mask_secrets_leaves_the_original_job_alone() -> None:
    job = normalise(V2_JOB).job
    mask_secrets(job)
    assert job["secrets"] == {"token": "s3cret"}


def test_mask_secrets_hides_a_literal_registry_password() -> None:
    job = job_with("prerequisites[0].auth", {"username": "u", "password": "hunter2"})
    assert mask_secrets(job)["prerequisites"][0]["auth"] == {
        "username": "u",
        "password": SECRET_MASK,
    }


def test_mask_secrets_keeps_a_registry_password_that_references_a_secret() -> None:
    auth = {"password": "<% $secrets.token %>"}
    job = job_with("prerequisites[0].auth", auth)
    assert mask_secrets(job)["prerequisites"][0]["auth"] == auth


def test_a_callback_reads_its_prerequisite_keys_through_this_parameters() -> None:
    job = load_job((EXAMPLES / "001_full_spec.yaml").read_text()).job
    start = render_callbacks(job, "taskrole")[0]
    assert start == Callback(
        prerequisite="pip_packages",
        event="containerStart",
        commands=["pip install -i https://pypi.example.org/simple numpy scipy"],
        failure_policy="fail",
    )


def test_callbacks_start_in_dependency_order_and_exit_in_reverse() -> None:
    job = load_job((EXAMPLES / "001_full_spec.yaml").read_text()).job
    order = [(c.prerequisite, c.event) for c in render_callbacks(job, "taskrole")]
    assert order == [
        ("pip_packages", "containerStart"),
        ("covid_data", "containerStart"),
        ("log_upload", "containerExit"),
        ("covid_data", "containerExit"),
    ]


def test_render_role_runs_start_callbacks_before_the_commands() -> None:
    job = load_job((EXAMPLES / "001_covid_data_callbacks.yaml").read_text()).job
    rendered = render_role(job, "taskrole")
    assert rendered.pre_commands[-1] == "export DATA_DIR=/data/covid19/data/"
    assert rendered.commands == ["ls $DATA_DIR"]


def test_an_ignored_callback_failure_cannot_fail_the_task() -> None:
    job = load_job((EXAMPLES / "001_full_spec.yaml").read_text()).job
    rendered = render_role(job, "taskrole")
    assert rendered.post_commands == [
        "hdfs dfs -put logs hdfs://logs/covid",
        "{\nrm -rf /data/covid19/data/\n} || true",
    ]


def test_a_data_reference_in_a_callback_is_refused() -> None:
    callbacks = [{"event": "containerStart", "commands": ["ls <% $data.name %>"]}]
    with pytest.raises(ProtocolError) as caught:
        normalise(changed(V2_JOB, "prerequisites[1].callbacks", callbacks))
    assert str(caught.value) == (
        "prerequisites[1].callbacks[0].commands[0]: unknown reference $data.name"
        " (only in a task role's commands)"
    )


def test_the_cache_of_reference_shapes_stays_bounded() -> None:
    """Reference texts come from users: the cache of their shapes must not grow without end."""
    from protocol import references

    scope = references.Scope(roots={"$parameters": {"model": "resnet"}})
    for number in range(references._MAX_SHAPES + 100):
        with pytest.raises(references.UnknownReference):
            references.resolve(f" $parameters.p{number} ", scope)
    assert len(references._SIMPLE_SHAPES) <= references._MAX_SHAPES
    assert references.render("<% $parameters.model %>", scope) == "resnet"
