"""Fixtures: a fake API server on loopback and a Kubernetes backend pointed at it."""

from __future__ import annotations

import functools
from collections.abc import Iterator

import pytest
from kubernetes import client

from backends.kubernetes.api import RetryPolicy, api_client_for
from backends.kubernetes.backend import KubernetesBackend
from backends.kubernetes.manifests import K8sOptions
from clusters import registry
from tests.support.fake_apiserver import serve
from tests.support.fake_cluster import FakeCluster


@pytest.fixture
def apiserver() -> Iterator[tuple[str, FakeCluster]]:
    with serve() as running:
        yield running


@pytest.fixture
def cluster(apiserver: tuple[str, FakeCluster]) -> FakeCluster:
    return apiserver[1]


@pytest.fixture
def sleeps() -> list[float]:
    """The backoff delays the backend asked for (nothing really sleeps)."""
    return []


@pytest.fixture
def k8s(
    apiserver: tuple[str, FakeCluster], sleeps: list[float], monkeypatch: pytest.MonkeyPatch
) -> Iterator[KubernetesBackend]:
    """The backend on the fake cluster, also as the portal's configured backend (what
    ``CLUSTER_BACKEND=kubernetes`` gives): capacity and submission checks ask it too."""
    api = api_client_for(client.Configuration(host=apiserver[0]))
    options = K8sOptions(namespace="default", node_selector={"pool": "jobs"})
    backend = KubernetesBackend(api, options, RetryPolicy(attempts=6, sleep=sleeps.append))
    monkeypatch.setattr(registry, "get_backend", functools.cache(lambda: backend))
    yield backend
    api.close()
