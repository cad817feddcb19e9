"""CLUSTER_BACKEND=kubernetes builds the backend from the K8S_* settings and a kubeconfig."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from clusters import registry
from clusters.backends.kubernetes.backend import KubernetesBackend
from tests.support.fake_cluster import FakeCluster


def kubeconfig(path: Path, url: str) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": url}}],
        "users": [{"name": "me", "user": {"token": "t0ken"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "me"}}],
    }))  # fmt: skip
    return path


def test_the_registry_builds_a_kubernetes_backend_from_settings(
    settings, tmp_path: Path, apiserver: tuple[str, FakeCluster]
):
    settings.CLUSTER_BACKEND = "kubernetes"
    settings.K8S_KUBECONFIG = str(kubeconfig(tmp_path / "config", apiserver[0]))
    settings.K8S_NAMESPACE = "research"
    settings.K8S_NODE_SELECTOR = ["pool=jobs", "zone = a"]
    backend = registry.get_backend()
    assert isinstance(backend, KubernetesBackend)
    assert backend.options.node_selector == {"pool": "jobs", "zone": "a"}
    assert backend.capacity().cpu == 0  # it talks to the fake: no nodes
    assert apiserver[1].requests[("GET", "/api/v1/nodes")] == 1


def test_a_bad_node_selector_is_refused_with_its_name(settings):
    settings.CLUSTER_BACKEND = "kubernetes"
    settings.K8S_NODE_SELECTOR = ["pool"]
    with pytest.raises(ValueError, match="K8S_NODE_SELECTOR"):
        registry.get_backend()


def test_the_image_pull_timeout_comes_from_its_setting(
    settings, tmp_path: Path, apiserver: tuple[str, FakeCluster]
):
    settings.CLUSTER_BACKEND = "kubernetes"
    settings.K8S_KUBECONFIG = str(kubeconfig(tmp_path / "config", apiserver[0]))
    settings.K8S_IMAGE_PULL_TIMEOUT_SECONDS = 42
    backend = registry.get_backend()
    assert isinstance(backend, KubernetesBackend)
    assert backend.options.image_pull_timeout_seconds == 42
