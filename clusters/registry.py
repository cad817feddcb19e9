"""The backend this portal runs jobs on, built once from settings."""

from __future__ import annotations

import shutil
from functools import cache
from pathlib import Path

from django.conf import settings

from backends.base import Backend
from backends.local.firewall import FirewallConfig
from backends.local.sandbox import SandboxConfig


@cache
def get_backend() -> Backend:
    # Each backend is imported only when chosen (here and in ``kubernetes_backend``), not to
    # dodge a cycle: a local portal never loads the Kubernetes client, a heavy import.
    if settings.CLUSTER_BACKEND == "local":
        from backends.local import LocalBackend

        return LocalBackend(
            settings.LOCAL_TASK_ROOT,
            host_ip=settings.LOCAL_TASK_IP,
            stop_grace_seconds=settings.LOCAL_STOP_GRACE_SECONDS,
            log_max_bytes=settings.LOCAL_TASK_LOG_MAX_BYTES,
            sandbox_config=local_sandbox(),
            task_path=settings.LOCAL_TASK_PATH,
            firewall=local_firewall(),
            task_ports=settings.LOCAL_TASK_PORTS,
            cpus=settings.LOCAL_CPUS or None,
            memory_mb=settings.LOCAL_MEMORY_MB or None,
        )
    if settings.CLUSTER_BACKEND == "kubernetes":
        return kubernetes_backend()
    if settings.CLUSTER_BACKEND == "slurm":
        return slurm_backend()
    raise ValueError(f"CLUSTER_BACKEND: unknown backend {settings.CLUSTER_BACKEND!r}")


def local_sandbox() -> SandboxConfig:
    """What every local task is kept from: the portal's tree, its var/ and task root, the home
    of the user it runs as, and what LOCAL_SANDBOX_HIDE adds."""
    hidden = [settings.BASE_DIR, settings.VAR_DIR, settings.LOCAL_TASK_ROOT, Path.home()]
    hidden += [Path(p) for p in settings.LOCAL_SANDBOX_HIDE]
    return SandboxConfig(
        enabled=settings.LOCAL_SANDBOX,
        uid_base=settings.LOCAL_TASK_UID_BASE,
        pids_max=settings.LOCAL_TASK_PIDS_MAX,
        disk_mb=settings.LOCAL_TASK_DISK_MB,
        nofile=settings.LOCAL_TASK_NOFILE,
        require_limits=settings.LOCAL_REQUIRE_LIMITS,
        hidden=tuple(dict.fromkeys(str(p) for p in hidden if str(p) != "/")),
        shared=tuple(settings.LOCAL_SANDBOX_SHARED),
        bwrap=settings.LOCAL_SANDBOX_BWRAP,
        images=settings.LOCAL_IMAGES,
        image_storage=settings.LOCAL_IMAGE_STORAGE,
    )


def local_firewall() -> FirewallConfig:
    """What of this host the local tasks reach (backends/local/firewall.py): their
    jobs' ports, the portal's public port (PORT) and LOCAL_TASK_OPEN_PORTS, DNS; nothing in
    LOCAL_TASK_CLOSED_NETWORKS."""
    return FirewallConfig(
        mode=settings.LOCAL_FIREWALL,
        table=settings.LOCAL_FIREWALL_TABLE,
        uid_base=settings.LOCAL_TASK_UID_BASE,
        open_ports=(settings.PORT, *map(int, settings.LOCAL_TASK_OPEN_PORTS)),
        closed_networks=tuple(settings.LOCAL_TASK_CLOSED_NETWORKS),
    )


def kubernetes_backend() -> Backend:
    from backends.kubernetes.api import RetryPolicy, make_api_client
    from backends.kubernetes.backend import KubernetesBackend
    from backends.kubernetes.manifests import K8sOptions

    options = K8sOptions(
        namespace=settings.K8S_NAMESPACE,
        gpu_resource=settings.K8S_GPU_RESOURCE,
        gpu_type_label=settings.K8S_GPU_TYPE_LABEL,
        image_pull_policy=settings.K8S_IMAGE_PULL_POLICY,
        node_selector=dict(settings.K8S_NODE_SELECTOR),
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


def slurm_backend() -> Backend:
    from backends.slurm.backend import SlurmBackend
    from backends.slurm.commands import SlurmClient

    client = SlurmClient(settings.SLURM_CONF, timeout=settings.SLURM_COMMAND_TIMEOUT_SECONDS)
    return SlurmBackend(
        settings.SLURM_ROOT,
        client,
        partition=settings.SLURM_PARTITION,
        stop_grace_seconds=settings.SLURM_STOP_GRACE_SECONDS,
        vc_partitions=dict(settings.SLURM_VC_PARTITIONS),
        accounts=dict(settings.SLURM_USER_ACCOUNTS),
    )


def tasks_use_host_programs(backend: Backend) -> bool:
    """Whether tasks run on the host's own file system (the local backend without images)."""
    return backend.name == "local" and settings.LOCAL_IMAGES != "charliecloud"


SBIN_SSHD = Path("/usr/sbin/sshd")


def host_sshd_missing(backend: Backend) -> str | None:
    """What ``make run`` says at start when tasks use this host's programs and it has no sshd
    (where the bootstrap looks: ``sshd`` on PATH, else ``/usr/sbin/sshd``); None otherwise."""
    if not tasks_use_host_programs(backend) or shutil.which("sshd") or SBIN_SSHD.exists():
        return None
    return (
        "no sshd on this host: the ssh plugin cannot start one in tasks, so nobody can ssh into "
        "them (install the openssh-server package; its own sshd need not run)"
    )
