"""CLUSTER_BACKEND=kubernetes builds the backend from the K8S_* settings and a kubeconfig."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from backends.kubernetes.backend import KubernetesBackend
from clusters import registry
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
    settings.K8S_NODE_SELECTOR = {"pool": "jobs", "zone": "a"}
    backend = registry.get_backend()
    assert isinstance(backend, KubernetesBackend)
    assert backend.options.node_selector == {"pool": "jobs", "zone": "a"}
    assert backend.capacity().cpu == 0  # it talks to the fake: no nodes
    assert apiserver[1].requests[("GET", "/api/v1/nodes")] == 1


@pytest.mark.parametrize(
    ("value", "read"),
    [("pool=jobs, zone = a", {"pool": "jobs", "zone": "a"}), ("pool", None), ("=jobs", None)],
)
def test_the_node_selector_is_read_once_at_start_and_a_bad_one_stops_it(value, read):
    """Parsed in settings.py only (it was parsed twice: a system check and the registry)."""
    code = "from portal import settings as s; print(s.K8S_NODE_SELECTOR)"
    run = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "K8S_NODE_SELECTOR": value},
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        check=False,
    )
    if read is None:
        assert run.returncode != 0 and "K8S_NODE_SELECTOR: expected key=value" in run.stderr
    else:
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == str(read)


def test_the_image_pull_timeout_comes_from_its_setting(
    settings, tmp_path: Path, apiserver: tuple[str, FakeCluster]
):
    settings.CLUSTER_BACKEND = "kubernetes"
    settings.K8S_KUBECONFIG = str(kubeconfig(tmp_path / "config", apiserver[0]))
    settings.K8S_IMAGE_PULL_TIMEOUT_SECONDS = 42
    backend = registry.get_backend()
    assert isinstance(backend, KubernetesBackend)
    assert backend.options.image_pull_timeout_seconds == 42
