"""The backend this portal runs jobs on, built once from settings."""

from __future__ import annotations

from functools import cache

from django.conf import settings

from clusters.backends.base import Backend


@cache
def get_backend() -> Backend:
    if settings.CLUSTER_BACKEND == "local":
        from clusters.backends.local import LocalBackend

        return LocalBackend(
            settings.LOCAL_TASK_ROOT,
            host_ip=settings.LOCAL_TASK_IP,
            stop_grace_seconds=settings.LOCAL_STOP_GRACE_SECONDS,
            log_max_bytes=settings.LOCAL_TASK_LOG_MAX_BYTES,
        )
    if settings.CLUSTER_BACKEND == "kubernetes":
        return kubernetes_backend()
    raise ValueError(f"CLUSTER_BACKEND: unknown backend {settings.CLUSTER_BACKEND!r}")


def kubernetes_backend() -> Backend:
    from clusters.backends.kubernetes.api import RetryPolicy, make_api_client
    from clusters.backends.kubernetes.backend import KubernetesBackend
    from clusters.backends.kubernetes.manifests import K8sOptions

    selector = {}
    for item in settings.K8S_NODE_SELECTOR:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"K8S_NODE_SELECTOR: expected key=value, got {item!r}")
        selector[key.strip()] = value.strip()
    options = K8sOptions(
        namespace=settings.K8S_NAMESPACE,
        gpu_resource=settings.K8S_GPU_RESOURCE,
        gpu_type_label=settings.K8S_GPU_TYPE_LABEL,
        image_pull_policy=settings.K8S_IMAGE_PULL_POLICY,
        node_selector=selector,
        default_image=settings.K8S_DEFAULT_IMAGE,
        port_base=settings.K8S_PORT_BASE,
        termination_grace_seconds=settings.K8S_STOP_GRACE_SECONDS,
        allow_host_path_storage=settings.K8S_ALLOW_HOST_PATH_STORAGE,
        image_pull_timeout_seconds=settings.K8S_IMAGE_PULL_TIMEOUT_SECONDS,
    )
    retry = RetryPolicy(
        attempts=settings.K8S_API_ATTEMPTS,
        base_seconds=settings.K8S_API_BACKOFF_SECONDS,
        cap_seconds=settings.K8S_API_BACKOFF_CAP_SECONDS,
    )
    api = make_api_client(settings.K8S_IN_CLUSTER, settings.K8S_KUBECONFIG, settings.K8S_CONTEXT)
    return KubernetesBackend(api, options, retry)
