"""The Kubernetes objects of one attempt, as plain dicts (the API's own JSON shape).

Per attempt: a headless Service (the root object: every other object names it as its owner, so
deleting it removes the attempt), an image pull Secret when a task brings registry credentials,
and per task a Secret holding its bootstrap script and its secret files (``TaskLaunch.files``,
e.g. the job's SSH private key) and a Pod that runs it. The script is a Secret, not a ConfigMap,
because the rendered commands may hold the job's secrets; scripts get one object each because one
holds at most 1 MiB and every script names all its peers. The Secret is mounted at ``/pai``:
``bootstrap.sh`` (0555), ``env.sh`` (the task's environment as exports, which the web
terminal's shell sources) and each file at ``/pai/files/<path>`` (0400), which the script copies
into the working directory (``PAI_FILES_DIR``). Storages are PVC or NFS volumes at
``/mnt/<name>``; a local-dir storage becomes a hostPath only when the admin allows it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from backends.base import StorageKind, StorageMount, TaskLaunch, check_file_path

Manifest = dict[str, Any]

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "gpu-portal"
JOB = "gpu-portal/job"
ATTEMPT = "gpu-portal/attempt"
ROLE = "gpu-portal/role"
INDEX = "gpu-portal/index"
RETRY = "gpu-portal/retry"
SELECTOR = f"{MANAGED_BY}={MANAGER}"
SCRIPT_DIR = "/pai"
FILES_DIR = f"{SCRIPT_DIR}/files"
TASK = "gpu-portal/task"
DEBUG_KEEP_HOURS = "gpu-portal/debug-keep-hours"  # pod annotation: keep a failed pod this long
_NOT_DNS = re.compile(r"[^a-z0-9-]+")


def pod_security() -> Manifest:
    """A task runs its user's code in its user's image, often as root (jobs pip install and
    apt-get in their command): the Pod Security Standard "baseline" (which a hostPath storage,
    allowed by an admin, leaves), and what such jobs can spare."""
    return {"seccompProfile": {"type": "RuntimeDefault"}}  # the runtime's syscall filter


def container_security() -> Manifest:
    return {
        "privileged": False,  # no host devices, no full capability set
        # no_new_privs: setuid binaries (sudo, su) and file capabilities grant nothing. sshd needs
        # none (it drops to its privsep user with setuid(2)); an image whose USER is not root and
        # that calls sudo breaks: such a job runs its image as root instead.
        "allowPrivilegeEscalation": False,
        # No raw sockets: no ARP or DNS spoofing of other pods. ping breaks where the runtime
        # does not allow ICMP echo sockets (net.ipv4.ping_group_range; Docker and containerd 2 do).
        "capabilities": {"drop": ["NET_RAW"]},
    }


@dataclass(frozen=True)
class K8sOptions:
    """What the settings say about every job's objects."""

    namespace: str = "default"
    gpu_resource: str = "nvidia.com/gpu"
    gpu_type_label: str = "gpu-portal/gpu-type"
    image_pull_policy: str = "IfNotPresent"
    node_selector: dict[str, str] = field(default_factory=dict)
    default_image: str = "python:3.11-slim"
    port_base: int = 20000
    termination_grace_seconds: int = 10
    allow_host_path_storage: bool = False  # mount local-dir storages as hostPath volumes
    image_pull_timeout_seconds: int = 300  # a failing image pull fails the task after this


class LaunchRefused(ValueError):
    """The task cannot run on this cluster as asked (the reason becomes its diagnostics)."""


def dns_label(text: str, limit: int = 63) -> str:
    """``text`` as a DNS label: lower case, ``[a-z0-9-]``, at most ``limit`` characters."""
    label = _NOT_DNS.sub("-", text.lower()).strip("-") or "x"
    if label != text or len(label) > limit:
        digest = hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()[:5]
        label = f"{label[: limit - 6].rstrip('-')}-{digest}"
    return label


def service_name(attempt_key: str) -> str:
    return dns_label(f"pai-{attempt_key}", 30)


def job_key(attempt_key: str) -> str:
    """``job12`` for the attempt ``job12-a0`` (the lifecycle's keys); the key itself otherwise."""
    match = re.fullmatch(r"(.+)-a\d+", attempt_key)
    return match.group(1) if match else attempt_key


def pod_name(attempt_key: str, host: str, retry: int) -> str:
    return f"{service_name(attempt_key)}-{host}" + (f"-r{retry}" if retry else "")


def labels(attempt_key: str) -> dict[str, str]:
    return {MANAGED_BY: MANAGER, JOB: job_key(attempt_key), ATTEMPT: attempt_key}


def owner(service: str, uid: str) -> list[Manifest]:
    return [{"apiVersion": "v1", "kind": "Service", "name": service, "uid": uid}]


def service(attempt_key: str) -> Manifest:
    """The headless Service: ``<host>.<service>`` resolves to each task's pod."""
    name = service_name(attempt_key)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": labels(attempt_key)},
        "spec": {
            "clusterIP": "None",
            "selector": {MANAGED_BY: MANAGER, ATTEMPT: attempt_key},
            "publishNotReadyAddresses": True,  # peers resolve each other before readiness
        },
    }


def script_secret(task: TaskLaunch, name: str, uid: str) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": name,
            "labels": labels(task.attempt_key),
            "ownerReferences": owner(service_name(task.attempt_key), uid),
        },
        "stringData": {
            "bootstrap.sh": task.script,
            "env.sh": env_file(task.env),
            **{file_key(path): content for path, content in task.files.items()},
        },
        "immutable": True,
    }


def env_file(env: dict[str, str]) -> str:
    """The task's environment as ``/bin/sh`` exports, for the shells of the web terminal."""
    return "".join(f"export {name}={shlex.quote(value)}\n" for name, value in env.items())


def file_key(path: str) -> str:
    """The Secret key of a task file (keys may not hold ``/``)."""
    digest = hashlib.sha1(check_file_path(path).encode(), usedforsecurity=False).hexdigest()
    return f"file-{digest[:16]}"


def script_volume(task: TaskLaunch, name: str) -> Manifest:
    """The task's Secret at ``/pai``: the script (0555) and the secret files (0400)."""
    items = [
        {"key": "bootstrap.sh", "path": "bootstrap.sh", "mode": 0o555},
        {"key": "env.sh", "path": "env.sh", "mode": 0o444},
    ]
    items += [
        {"key": file_key(path), "path": f"files/{path}", "mode": 0o400}
        for path in sorted(task.files)
    ]
    return {"name": "bootstrap", "secret": {"secretName": name, "items": items}}


def storage_volumes(task: TaskLaunch, options: K8sOptions) -> tuple[list[Manifest], list[Manifest]]:
    """(volumes, volume mounts) of the task's storages, each at ``/mnt/<name>``; LaunchRefused
    for one this cluster cannot mount."""
    volumes, mounts = [], []
    for number, store in enumerate(task.storages):
        volume = {"name": f"storage-{number}", **storage_source(store, options)}
        volumes.append(volume)
        mounts.append(
            {"name": volume["name"], "mountPath": f"/mnt/{store.name}", "readOnly": store.read_only}
        )
    return volumes, mounts


def storage_source(store: StorageMount, options: K8sOptions) -> Manifest:
    what = f"storage {store.name!r}"
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", store.name) or store.name in (".", ".."):
        raise LaunchRefused(f"{what}: not a name that can be mounted at /mnt/<name>")
    if store.kind == StorageKind.PVC:
        if not store.claim_name:
            raise LaunchRefused(f"{what} is a PVC storage without a claim name (ask an admin)")
        return {
            "persistentVolumeClaim": {"claimName": store.claim_name, "readOnly": store.read_only}
        }
    if store.kind == StorageKind.NFS:
        if not store.server or not store.path.startswith("/"):
            raise LaunchRefused(
                f"{what} is an NFS storage without a server and an absolute path (ask an admin)"
            )
        return {"nfs": {"server": store.server, "path": store.path, "readOnly": store.read_only}}
    if store.kind == StorageKind.LOCAL_DIR:
        if not options.allow_host_path_storage:
            raise LaunchRefused(
                f"{what} is a directory on the portal's machine (local-dir), which pods on "
                "Kubernetes cannot mount; an admin can define it as a PVC or NFS storage, or "
                "allow hostPath storages (K8S_ALLOW_HOST_PATH_STORAGE)"
            )
        if not store.path.startswith("/"):
            raise LaunchRefused(f"{what} has no absolute directory configured (ask an admin)")
        return {"hostPath": {"path": store.path, "type": "Directory"}}
    raise LaunchRefused(f"{what} is of an unknown kind {store.kind!r}")


def pull_secret_name(task: TaskLaunch) -> str:
    """One pull secret per registry of the attempt."""
    registry = (task.pull_secret or {}).get("registry", "")
    digest = hashlib.sha1(registry.encode(), usedforsecurity=False).hexdigest()[:8]
    return f"{service_name(task.attempt_key)}-pull-{digest}"


def docker_config(credentials: dict[str, str]) -> str:
    """``.dockerconfigjson`` for ``{registry, username, password}``."""
    registry = credentials.get("registry") or "https://index.docker.io/v1/"
    user, password = credentials.get("username", ""), credentials.get("password", "")
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    return json.dumps({"auths": {registry: {"username": user, "password": password, "auth": auth}}})


def pull_secret(task: TaskLaunch, uid: str) -> Manifest:
    assert task.pull_secret is not None
    encoded = base64.b64encode(docker_config(task.pull_secret).encode()).decode()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": pull_secret_name(task),
            "labels": labels(task.attempt_key),
            "ownerReferences": owner(service_name(task.attempt_key), uid),
        },
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": encoded},
    }


def quantities(task: TaskLaunch, options: K8sOptions) -> dict[str, str]:
    amounts = {"cpu": str(task.cpu), "memory": f"{task.memory_mb}Mi"}
    if task.gpu > 0:
        amounts[options.gpu_resource] = str(task.gpu)
    return amounts


def pod(task: TaskLaunch, host: str, uid: str, options: K8sOptions) -> Manifest:
    """The pod of one task: requests equal limits, so it gets exactly what the job asked for."""
    name = pod_name(task.attempt_key, host, task.retry)
    svc = service_name(task.attempt_key)
    node_selector = dict(options.node_selector)
    if task.gpu_type:
        node_selector[options.gpu_type_label] = task.gpu_type
    ports = [
        {"containerPort": port, "protocol": "TCP"}
        for numbers in task.placement.ports.values()
        for port in numbers
    ]
    env = []  # the task's own variables (PAI_CONTAINER_ID too) come with its bootstrap script
    if task.files:
        env.append({"name": "PAI_FILES_DIR", "value": FILES_DIR})
    storage_vols, storage_mounts = storage_volumes(task, options)
    if task.gpu == 0:  # the NVIDIA runtime would otherwise show every GPU of the node
        env.append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"})
    container: Manifest = {
        "name": "main",
        "image": task.image or options.default_image,
        "imagePullPolicy": options.image_pull_policy,
        "command": ["/bin/sh", f"{SCRIPT_DIR}/bootstrap.sh"],
        "env": env,
        "resources": {"requests": quantities(task, options), "limits": quantities(task, options)},
        "volumeMounts": [
            {"name": "bootstrap", "mountPath": SCRIPT_DIR, "readOnly": True},
            {"name": "dshm", "mountPath": "/dev/shm"},  # noqa: S108
            *storage_mounts,
        ],
    }
    if ports:
        container["ports"] = ports
    container["securityContext"] = container_security()
    spec: Manifest = {
        "restartPolicy": "Never",
        "hostname": host,
        "subdomain": svc,
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
        "securityContext": pod_security(),
        "terminationGracePeriodSeconds": options.termination_grace_seconds,
        "containers": [container],
        "volumes": [
            script_volume(task, name),
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{task.shm_mb}Mi"}},
            *storage_vols,
        ],
    }
    if node_selector:
        spec["nodeSelector"] = node_selector
    if task.pull_secret:
        spec["imagePullSecrets"] = [{"name": pull_secret_name(task)}]
    annotations = {TASK: f"{task.role}-{task.index}"}
    if task.debug_keep_hours > 0:
        annotations[DEBUG_KEEP_HOURS] = str(task.debug_keep_hours)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {
                **labels(task.attempt_key),
                ROLE: host.rsplit("-", 1)[0],
                INDEX: str(task.index),
                RETRY: str(task.retry),
            },
            "annotations": annotations,
            "ownerReferences": owner(svc, uid),
        },
        "spec": spec,
    }
