"""Every object the backend creates, and every file in deploy/kubernetes/, is valid for 1.30."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from test_kubernetes_backend import launch_all

from clusters.backends.kubernetes import manifests as m
from clusters.backends.kubernetes.backend import KubernetesBackend
from tests.support.fake_cluster import FakeCluster

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"


def valid(manifest: dict[str, object]) -> None:
    kubernetes_validate.validate(manifest, desired_version="1.30", strict=True)


def test_every_object_the_backend_creates_validates(k8s: KubernetesBackend, cluster: FakeCluster):
    launch_all(k8s, pull_secret={"registry": "r.example.com", "username": "u", "password": "p"})
    kinds = {obj["kind"] for obj in cluster.created}
    assert kinds == {"Service", "Secret", "Pod"}
    for manifest in cluster.created:
        valid(manifest)


def test_the_manifests_as_built_validate_before_the_client_sees_them(k8s: KubernetesBackend):
    valid(m.service("job7-a0"))
    with pytest.raises(kubernetes_validate.ValidationError):
        valid({**m.service("job7-a0"), "spec": {"clusterIP": None, "bogus": 1}})


def deploy_documents() -> list[dict[str, object]]:
    docs = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        docs.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)
    return docs


def test_the_deployment_manifests_validate():
    docs = deploy_documents()
    kinds = {doc["kind"] for doc in docs}
    assert {"Deployment", "ServiceAccount", "Role", "RoleBinding", "Service"} <= kinds
    for doc in docs:
        valid(doc)


def test_the_role_grants_only_what_the_backend_uses():
    (role,) = (doc for doc in deploy_documents() if doc["kind"] == "Role")
    granted = {(res, verb) for rule in role["rules"] for res in rule["resources"]
               for verb in rule["verbs"]}  # fmt: skip
    assert ("pods", "deletecollection") in granted
    assert ("pods/exec", "create") in granted
    assert ("pods", "watch") in granted  # watchcluster
    assert not any(verb in ("*", "update") for _, verb in granted)
    assert {res for res, verb in granted if verb == "watch"} == {"pods"}


def test_each_worker_pod_runs_the_pod_watcher_beside_the_worker():
    (worker,) = (doc for doc in deploy_documents() if doc["metadata"]["name"].endswith("worker"))
    containers = {c["name"]: c for c in worker["spec"]["template"]["spec"]["containers"]}
    assert containers["watcher"]["command"][-1] == "watchcluster"
    env = {e["name"]: e.get("value") for e in containers["watcher"]["env"]}
    assert env["CLUSTER_BACKEND"] == "kubernetes"


def test_the_cluster_role_binding_names_the_namespace_the_readme_installs_into():
    readme = (DEPLOY.parents[1] / "README.md").read_text()
    (binding,) = (doc for doc in deploy_documents() if doc["kind"] == "ClusterRoleBinding")
    (subject,) = binding["subjects"]
    namespace = subject["namespace"]
    assert f"create a namespace `{namespace}`" in readme
    assert f"kubectl -n {namespace} apply -f deploy/kubernetes/" in readme
    assert all("namespace" not in doc["metadata"] for doc in deploy_documents())  # from -n


def test_job_pods_reach_no_private_address_and_the_web_pods_no_job_pod():
    """The NetworkPolicies select pods by the label the backend gives every job pod."""
    policies = {doc["metadata"]["name"]: doc for doc in deploy_documents()
                if doc["kind"] == "NetworkPolicy"}  # fmt: skip
    assert m.JOB in m.labels("job-7-a0")
    egress = policies["gpu-portal-jobs-egress"]["spec"]
    assert egress["podSelector"] == {"matchExpressions": [{"key": m.JOB, "operator": "Exists"}]}
    (outside,) = (
        rule["to"][0]["ipBlock"] for rule in egress["egress"] if "ipBlock" in rule["to"][0]
    )
    assert outside["cidr"] == "0.0.0.0/0"
    for private in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"):
        assert private in outside["except"]
    web = policies["gpu-portal-web-not-from-jobs"]["spec"]
    (pods,) = web["ingress"][0]["from"]
    assert pods["podSelector"]["matchExpressions"] == [{"key": m.JOB, "operator": "DoesNotExist"}]
