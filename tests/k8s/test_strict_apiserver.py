"""The fake API server checks what a real one checks, with the real server's answers, through
the official client: names, label keys and values, the Secret size limit, label selectors,
resourceVersion and Terminating pods. And the backend says why when the cluster refuses a task."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from test_kubernetes_backend import SHAPES, launch_of, running

from backends.kubernetes import manifests as m
from backends.kubernetes.backend import KubernetesBackend
from tests.support.fake_cluster import FakeCluster
from tests.support.k8s_rules import MAX_SECRET_BYTES


@pytest.fixture
def core(k8s: KubernetesBackend) -> client.CoreV1Api:
    return client.CoreV1Api(k8s.api_client)


def pod(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}], **spec},
    }


def refusal(call: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """The Status body of a call the server refuses."""
    with pytest.raises(ApiException) as refused:
        call(*args, _preload_content=False, **kwargs)
    body: dict[str, Any] = json.loads(refused.value.body)
    assert body["code"] == refused.value.status
    return body


def invalid_fields(body: dict[str, Any]) -> list[str]:
    assert (body["code"], body["reason"], body["kind"]) == (422, "Invalid", "Status")
    return [cause["field"] for cause in body["details"]["causes"]]


# -- names --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["Worker_0", "-worker", "worker-", "a" * 254, "wörker"])
def test_a_pod_name_must_be_a_dns_1123_subdomain(core, name: str):
    body = refusal(core.create_namespaced_pod, "default", pod(name))
    assert invalid_fields(body) == ["metadata.name"] * len(body["details"]["causes"])
    assert body["message"].startswith(f'Pod "{name}" is invalid: metadata.name: Invalid value')


def test_a_dns_1123_subdomain_may_hold_dots_and_253_characters(core, cluster: FakeCluster):
    name = ".".join(["a" * 63] * 3 + ["b" * 61])
    assert len(name) == 253
    core.create_namespaced_pod("default", pod(name), _preload_content=False)
    assert name in cluster.pods()


@pytest.mark.parametrize("name", ["1pai", "pai.job", "a" * 64])
def test_a_service_name_must_be_a_dns_1035_label(core, name: str):
    service = {"metadata": {"name": name}, "spec": {"clusterIP": "None"}}
    body = refusal(core.create_namespaced_service, "default", service)
    assert "metadata.name" in invalid_fields(body)
    assert "DNS-1035 label" in body["message"] or "no more than 63" in body["message"]


def test_a_pods_hostname_must_be_a_dns_1123_label(core):
    body = refusal(core.create_namespaced_pod, "default", pod("p", hostname="worker_0"))
    assert invalid_fields(body) == ["spec.hostname"]


# -- labels -------------------------------------------------------------------------------------


def test_a_label_value_holds_at_most_63_characters(core, cluster: FakeCluster):
    core.create_namespaced_pod("default", pod("ok", {"k": "v" * 63}), _preload_content=False)
    body = refusal(core.create_namespaced_pod, "default", pod("long", {"k": "v" * 64}))
    assert invalid_fields(body) == ["metadata.labels"]
    assert "must be no more than 63 characters" in body["message"]


def test_a_label_value_is_empty_or_alphanumeric_at_both_ends(core):
    body = refusal(core.create_namespaced_pod, "default", pod("p", {"k": "-v"}))
    assert "a valid label must be an empty string" in body["message"]


def test_a_label_keys_name_part_holds_at_most_63_characters(core):
    body = refusal(core.create_namespaced_pod, "default", pod("p", {"x/" + "n" * 64: "v"}))
    assert "name part must be no more than 63 characters" in body["message"]


def test_a_label_keys_prefix_must_be_a_dns_subdomain(core):
    body = refusal(core.create_namespaced_pod, "default", pod("p", {"Gpu_Portal/job": "v"}))
    assert "prefix part" in body["message"]


def test_every_broken_rule_is_a_cause_of_its_own(core):
    body = refusal(core.create_namespaced_pod, "default", pod("P", {"k": "v" * 64}))
    assert set(invalid_fields(body)) == {"metadata.name", "metadata.labels"}
    assert body["message"].startswith('Pod "P" is invalid: [')


# -- the Secret size limit ----------------------------------------------------------------------


def secret(name: str, size: int) -> dict[str, Any]:
    return {"metadata": {"name": name}, "type": "Opaque", "stringData": {"data": "x" * size}}


def test_a_secret_holds_at_most_1_mib(core, cluster: FakeCluster):
    core.create_namespaced_secret(
        "default", secret("full", MAX_SECRET_BYTES), _preload_content=False
    )
    body = refusal(core.create_namespaced_secret, "default", secret("over", MAX_SECRET_BYTES + 1))
    assert invalid_fields(body) == ["data"]
    assert body["message"] == (
        'Secret "over" is invalid: data: Too long: may not be more than 1048576 bytes'
    )
    assert ("secrets", "default", "over") not in cluster.objects


def test_a_task_whose_files_pass_the_secret_limit_is_refused_with_the_reason(
    k8s: KubernetesBackend, cluster: FakeCluster
):
    shape = SHAPES[0]
    (placement,) = k8s.place("job8-a0", [shape])
    launch = launch_of("job8-a0", shape, placement, files={"data/big": "x" * MAX_SECRET_BYTES})
    with pytest.raises(m.LaunchRefused) as refused:
        k8s.launch(launch)
    assert str(refused.value).startswith("the cluster refused the secret: Secret ")
    assert "Too long: may not be more than 1048576 bytes" in str(refused.value)
    assert cluster.pods() == {}  # no pod without its script


# -- label selectors ----------------------------------------------------------------------------


@pytest.fixture
def labelled(core) -> None:
    for name, labels in {
        "a": {"app": "portal", "tier": "web"},
        "b": {"app": "portal", "tier": "worker"},
        "c": {"app": "other"},
        "d": {},
    }.items():
        core.create_namespaced_pod("default", pod(name, labels), _preload_content=False)


@pytest.mark.parametrize(
    ("selector", "names"),
    [
        ("app=portal", "ab"),
        ("app==portal", "ab"),
        ("app!=portal", "cd"),  # also those without the label
        ("tier in (web, worker)", "ab"),
        ("tier notin (web)", "bcd"),  # also those without the label
        ("tier", "ab"),
        ("!tier", "cd"),
        ("app=portal,tier!=web", "b"),
        ("app in (portal,other),!tier", "c"),
        ("", "abcd"),
    ],
)
def test_label_selectors_select_as_the_real_server_does(core, labelled, selector, names):
    listed = core.list_namespaced_pod("default", label_selector=selector, _preload_content=False)
    items = json.loads(listed.data)["items"]
    assert "".join(sorted(p["metadata"]["name"] for p in items)) == names


@pytest.mark.parametrize("selector", ["tier in ()", "app=portal,,x", "tier in (web", "a b"])
def test_a_selector_the_server_cannot_parse_is_a_400(core, selector: str):
    body = refusal(core.list_namespaced_pod, "default", label_selector=selector)
    assert (body["code"], body["reason"]) == (400, "BadRequest")


# -- resourceVersion and Terminating pods -------------------------------------------------------


def test_every_change_takes_the_next_resource_version_and_a_list_says_where_it_is(
    core, cluster: FakeCluster
):
    created = json.loads(
        core.create_namespaced_pod("default", pod("p"), _preload_content=False).data
    )
    first = int(created["metadata"]["resourceVersion"])
    cluster.set_status("p", {"phase": "Pending"})
    listed = json.loads(core.list_namespaced_pod("default", _preload_content=False).data)
    assert int(listed["metadata"]["resourceVersion"]) == first + 1
    assert listed["items"][0]["metadata"]["resourceVersion"] == str(first + 1)


def test_a_deleted_running_pod_stays_terminating_for_its_grace_period(core, cluster: FakeCluster):
    core.create_namespaced_pod(
        "default", pod("p", terminationGracePeriodSeconds=20), _preload_content=False
    )
    cluster.set_status("p", running("10.0.0.1", "node-a"))
    deleted = json.loads(core.delete_namespaced_pod("p", "default", _preload_content=False).data)
    assert deleted["metadata"]["deletionGracePeriodSeconds"] == 20
    listed = json.loads(core.list_namespaced_pod("default", _preload_content=False).data)
    assert [p["metadata"]["name"] for p in listed["items"]] == ["p"]  # still listed
    assert "deletionTimestamp" in listed["items"][0]["metadata"]
    cluster.advance(19)
    assert "p" in cluster.pods()
    cluster.advance(2)
    assert cluster.pods() == {}


def test_a_pod_that_never_ran_or_was_deleted_with_no_grace_goes_at_once(
    k8s: KubernetesBackend, core, cluster: FakeCluster
):
    core.create_namespaced_pod("default", pod("pending"), _preload_content=False)
    core.delete_namespaced_pod("pending", "default", _preload_content=False)
    assert "pending" not in cluster.pods()  # no node: nothing to stop
    core.create_namespaced_pod("default", pod("now"), _preload_content=False)
    cluster.set_status("now", running("10.0.0.1", "node-a"))
    core.delete_namespaced_pod("now", "default", grace_period_seconds=0, _preload_content=False)
    assert cluster.pods() == {}
