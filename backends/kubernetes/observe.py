"""Reading what the cluster says: a pod as a task observation, the nodes as capacity."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from kubernetes.utils.quantity import parse_quantity as _parse

from backends.base import Capacity, Observation, TaskPhase, Usage
from backends.exits import describe_exit

Pod = dict[str, Any]
# Why a container waits, when that is worth telling the user (not plain ContainerCreating).
WAITING_REASONS = {
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
}


# Image pulls that fail: a task whose pull keeps failing longer than the image pull timeout
# fails (missing registry credentials must not leave a job pending for ever); a name that can
# never be pulled fails at once.
PULL_ERRORS = {"ErrImagePull", "ImagePullBackOff"}
PULL_HOPELESS = {"InvalidImageName"}


def observe_pod(
    ref: str, pod: Pod, image_pull_timeout: float = 300, now: datetime | None = None
) -> Observation:
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    node = (pod.get("spec") or {}).get("nodeName") or ""
    container = _main_container(status)
    state = container.get("state") or {}
    started = _time((state.get("running") or {}).get("startedAt") or status.get("startTime"))
    if phase == "Running":
        return Observation(
            ref, TaskPhase.RUNNING, ip=status.get("podIP") or "", node=node, started_at=started
        )
    if phase in ("Succeeded", "Failed"):
        return _finished(ref, pod, phase, node)
    if phase == "Unknown":
        return Observation(ref, TaskPhase.PENDING, node=node, diagnostics=_unknown(status))
    now = now or datetime.now(UTC)
    failed = pull_failure(pod, image_pull_timeout, now)
    if failed:
        return Observation(ref, TaskPhase.FAILED, node=node, diagnostics=failed, finished_at=now)
    return Observation(ref, TaskPhase.PENDING, node=node, diagnostics=pending_reason(pod))


def pull_failure(pod: Pod, timeout: float, now: datetime) -> str:
    """The kubelet's diagnostics when the pod's image pull has failed for good: at once for a
    name that can never be pulled, else once the pull has kept failing for more than
    ``timeout`` seconds since the kubelet took the pod (``status.startTime``, which is before
    the first pull; it is the pod's own record, so a portal restart changes nothing). "" while
    the pod may still start."""
    status = pod.get("status") or {}
    waiting = (_main_container(status).get("state") or {}).get("waiting") or {}
    reason = waiting.get("reason") or ""
    if reason not in PULL_ERRORS | PULL_HOPELESS:
        return ""
    text = f"{reason}: {waiting.get('message') or 'the image could not be pulled'}"
    if reason in PULL_HOPELESS:
        return text
    since = _time(status.get("startTime")) or _scheduled_at(status)
    since = since or _time((pod.get("metadata") or {}).get("creationTimestamp"))
    if since is None or (now - since).total_seconds() <= timeout:
        return ""
    return f"{text} (the image pull kept failing for {int((now - since).total_seconds())}s)"


def _scheduled_at(status: dict[str, Any]) -> datetime | None:
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "True":
            return _time(condition.get("lastTransitionTime"))
    return None


def pending_reason(pod: Pod) -> str:
    """Why a pending pod is not running yet, as the scheduler or the kubelet says it."""
    status = pod.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            reason = condition.get("reason") or "Unschedulable"
            return f"{reason}: {condition.get('message') or 'no node fits the task'}"
    waiting = (_main_container(status).get("state") or {}).get("waiting") or {}
    reason = waiting.get("reason") or ""
    if reason in WAITING_REASONS:
        return f"{reason}: {waiting.get('message') or reason}"
    return reason  # "" or ContainerCreating: nothing wrong


def _finished(ref: str, pod: Pod, phase: str, node: str) -> Observation:
    status = pod.get("status") or {}
    terminated = (_main_container(status).get("state") or {}).get("terminated") or {}
    code = terminated.get("exitCode")
    started = _time(terminated.get("startedAt") or status.get("startTime"))
    finished = _time(terminated.get("finishedAt"))
    if phase == "Succeeded":
        return Observation(
            ref, TaskPhase.SUCCEEDED, node=node, exit_code=0, started_at=started,
            finished_at=finished,
        )  # fmt: skip
    if code is None:  # evicted, or never started: the pod's own reason
        reason = status.get("reason") or "Failed"
        diagnostics = f"{reason}: {status.get('message') or 'the pod failed'}"
    else:
        reason = terminated.get("reason") or "Error"
        diagnostics = f"{reason}: {describe_exit(int(code))}"
        if terminated.get("message"):
            diagnostics += f" ({terminated['message']})"
    return Observation(
        ref,
        TaskPhase.FAILED,
        node=node,
        exit_code=None if code is None else int(code),
        diagnostics=diagnostics,
        started_at=started,
        finished_at=finished,
    )


def debug_keep_until(pod: Pod, hours_annotation: str) -> datetime | None:
    """Until when a failed pod of a debug job stays (``hours_annotation`` hours after its
    container ended); None for any other pod."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    if status.get("phase") != "Failed":
        return None
    try:
        hours = int((meta.get("annotations") or {}).get(hours_annotation, "0"))
    except ValueError:
        return None
    if hours <= 0:
        return None
    terminated = (_main_container(status).get("state") or {}).get("terminated") or {}
    ended = _time(
        terminated.get("finishedAt") or status.get("startTime") or meta.get("creationTimestamp")
    )
    return ended + timedelta(hours=hours) if ended else None


def _unknown(status: dict[str, Any]) -> str:
    return f"Unknown: {status.get('message') or 'the node of the task stopped reporting'}"


def _main_container(status: dict[str, Any]) -> dict[str, Any]:
    for container in status.get("containerStatuses") or []:
        if container.get("name") == "main":
            return dict(container)
    return {}


def _time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def pod_usage(metrics: dict[str, Any]) -> Usage:
    """A pod's usage from its PodMetrics (the metrics API): its containers' cores, averaged
    by metrics-server over its window, and their working set summed. The API has no GPUs."""
    cpu, memory = Decimal(0), Decimal(0)
    for container in metrics.get("containers") or []:
        usage = container.get("usage") or {}
        cpu += parse_quantity(usage.get("cpu", "0"))
        memory += parse_quantity(usage.get("memory", "0"))
    return Usage(cpu_cores=round(float(cpu), 3), memory_bytes=int(memory))


def parse_quantity(text: str) -> Decimal:
    """``"3800m"`` -> 3.8, ``"32Gi"`` -> 34359738368."""
    return Decimal(_parse(text))  # type: ignore[no-untyped-call]


def usable_nodes(
    nodes: list[dict[str, Any]], node_selector: dict[str, str]
) -> Iterator[tuple[str, dict[str, str], dict[str, str]]]:
    """``(name, labels, allocatable)`` of each schedulable node that jobs may use."""
    for node in nodes:
        meta, spec = node.get("metadata") or {}, node.get("spec") or {}
        node_labels = meta.get("labels") or {}
        if spec.get("unschedulable"):
            continue
        if any(node_labels.get(key) != value for key, value in node_selector.items()):
            continue
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        yield str(meta.get("name") or ""), node_labels, allocatable


def node_capacities(
    nodes: list[dict[str, Any]],
    gpu_resource: str,
    gpu_type_label: str,
    node_selector: dict[str, str],
) -> dict[str, Capacity]:
    """What each node that jobs may use can allocate, by node name: its cpu, memory and GPUs
    (under the GPU type its label names, ``"gpu"`` without one): ``Backend.nodes()``."""
    out = {}
    for name, node_labels, allocatable in usable_nodes(nodes, node_selector):
        count = int(parse_quantity(allocatable.get(gpu_resource, "0")))
        out[name] = Capacity(
            cpu=int(parse_quantity(allocatable.get("cpu", "0"))),
            memory_mb=int(parse_quantity(allocatable.get("memory", "0")) / 2**20),
            gpus={node_labels.get(gpu_type_label) or "gpu": count} if count else {},
        )
    return out


def capacity_of(
    nodes: list[dict[str, Any]],
    gpu_resource: str,
    gpu_type_label: str,
    node_selector: dict[str, str],
) -> Capacity:
    """The sum of what the schedulable nodes that jobs may use can allocate."""
    cpu, memory = Decimal(0), Decimal(0)
    gpus: Counter[str] = Counter()
    for _, node_labels, allocatable in usable_nodes(nodes, node_selector):
        cpu += parse_quantity(allocatable.get("cpu", "0"))
        memory += parse_quantity(allocatable.get("memory", "0"))
        count = int(parse_quantity(allocatable.get(gpu_resource, "0")))
        if count:
            gpus[node_labels.get(gpu_type_label) or "gpu"] += count
    return Capacity(cpu=int(cpu), memory_mb=int(memory / 2**20), gpus=dict(gpus))
