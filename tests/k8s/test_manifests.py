"""Every object the backend creates, and every file in deploy/kubernetes/, is valid for 1.30."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from test_kubernetes_backend import launch_all

from backends.kubernetes import manifests as m
from backends.kubernetes.backend import KubernetesBackend
from tests.support.fake_cluster import FakeCluster

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
README = DEPLOY.parents[1] / "README.md"
SECRET_NAME = re.compile(r"PASSWORD|SECRET|TOKEN|KEY|_URL$")


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
    granted = {(group, res, verb) for rule in role["rules"] for group in rule["apiGroups"]
               for res in rule["resources"] for verb in rule["verbs"]}  # fmt: skip
    assert ("", "pods", "deletecollection") in granted
    assert ("", "pods/exec", "create") in granted
    assert ("", "pods", "watch") in granted  # watchcluster
    assert ("metrics.k8s.io", "pods", "list") in granted  # task usage (jobs.usage)
    assert {(group, verb) for group, _, verb in granted if group == "metrics.k8s.io"} == {
        ("metrics.k8s.io", "list")
    }
    assert not any(verb in ("*", "update") for _, _, verb in granted)
    assert {(group, res) for group, res, verb in granted if verb == "watch"} == {("", "pods")}


def test_each_worker_pod_runs_the_pod_watcher_beside_the_worker():
    (worker,) = (doc for doc in deploy_documents() if doc["metadata"]["name"].endswith("worker"))
    containers = {c["name"]: c for c in worker["spec"]["template"]["spec"]["containers"]}
    assert containers["watcher"]["command"][-1] == "watchcluster"
    env = {e["name"]: e.get("value") for e in containers["watcher"]["env"]}
    assert env["CLUSTER_BACKEND"] == "kubernetes"


def binding_namespace() -> str:
    (binding,) = (doc for doc in deploy_documents() if doc["kind"] == "ClusterRoleBinding")
    (subject,) = binding["subjects"]
    return subject["namespace"]


def test_the_cluster_role_binding_names_the_namespace_the_readme_installs_into():
    namespace = binding_namespace()
    assert f"creates the namespace `{namespace}`" in README.read_text()
    assert f"kubectl -n {namespace} apply -f deploy/kubernetes/" in README.read_text()
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


def portal_pods() -> dict[str, dict[str, Any]]:
    """The pod template of each Deployment in deploy/kubernetes/, by its component."""
    deployments = [doc for doc in deploy_documents() if doc["kind"] == "Deployment"]
    return {
        doc["metadata"]["labels"]["app.kubernetes.io/component"]: doc["spec"]["template"]["spec"]
        for doc in deployments
    }


def containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*spec.get("initContainers", []), *spec["containers"]]


def test_every_portal_container_meets_the_restricted_profile():
    pods = portal_pods()
    assert set(pods) == {"web", "worker", "beat"}
    for spec in pods.values():
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["runAsUser"] > 0
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for container in containers(spec):
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False, container["name"]
            assert security["capabilities"] == {"drop": ["ALL"]}, container["name"]
            assert security["readOnlyRootFilesystem"] is True, container["name"]
            assert not {"privileged", "runAsUser", "seccompProfile"} & set(security)


def test_every_portal_container_writes_only_to_empty_dirs():
    """The root file system is read-only: PORTAL_VAR_DIR and /tmp (Python's tempfile) are not."""
    for component, spec in portal_pods().items():
        scratch = {volume["name"] for volume in spec["volumes"] if "emptyDir" in volume}
        for container in containers(spec):
            mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
            env = {item["name"]: item.get("value") for item in container["env"]}
            assert mounts.get(env["PORTAL_VAR_DIR"]) in scratch, component
            assert mounts.get("/tmp") in scratch, component
            if component == "beat":
                schedule = container["command"][container["command"].index("--schedule") + 1]
                assert schedule.startswith(env["PORTAL_VAR_DIR"] + "/")


def test_only_the_pods_that_run_the_backend_hold_the_service_account_token():
    pods = portal_pods()
    for component in ("web", "worker"):  # the terminal and logs; passes and the pod watcher
        assert pods[component]["serviceAccountName"] == "gpu-portal"
        assert pods[component].get("automountServiceAccountToken", True) is True
    assert "serviceAccountName" not in pods["beat"]  # it only puts tasks on the queue
    assert pods["beat"]["automountServiceAccountToken"] is False


def test_job_pods_meet_the_baseline_without_raw_sockets_or_escalation(
    k8s: KubernetesBackend, cluster: FakeCluster
):
    launch_all(k8s)
    pods = [obj for obj in cluster.created if obj["kind"] == "Pod"]
    assert pods
    for pod in pods:
        spec = pod["spec"]
        assert spec["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
        assert not {"hostNetwork", "hostPID", "hostIPC"} & set(spec)
        for container in spec["containers"]:
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False
            assert security["privileged"] is False
            assert security["capabilities"] == {"drop": ["NET_RAW"]}
            assert "ports" not in container or all("hostPort" not in p for p in container["ports"])


def test_no_password_is_written_in_the_readme_or_the_manifests():
    """Credentials in URLs are placeholders; the manifests take every secret from the Secret
    install.sh makes."""
    for path in (README, *DEPLOY.iterdir()):
        for secret in re.findall(r"://[^\s/@:`]*:([^\s/@`]*)@", path.read_text()):
            assert secret == "<password>", f"{path.name}: {secret}"
    for spec in portal_pods().values():
        for container in containers(spec):
            literal = {item["name"] for item in container["env"] if "value" in item}
            assert not {name for name in literal if SECRET_NAME.search(name)}
            assert container["envFrom"] == [{"secretRef": {"name": "gpu-portal-env"}}]
