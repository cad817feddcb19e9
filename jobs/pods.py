"""The live tasks as Kubernetes pods (``GET /api/v2/kubernetes/pods``, OpenPAI's admin view of
its pods), on any backend: the tasks the database holds as waiting or running with a backend
reference, each as the backend sees it now (``Backend.observe``, one call for them all)."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from backends.base import Backend, Observation, TaskPhase
from jobs.models import Task
from jobs.states import LIVE_TASK_STATES

PHASES = {
    TaskPhase.PENDING: "Pending",
    TaskPhase.RUNNING: "Running",
    TaskPhase.SUCCEEDED: "Succeeded",
    TaskPhase.FAILED: "Failed",
    TaskPhase.GONE: "Unknown",
}
MAX_PODS = 5000


def pod_of(task: Task, seen: Observation | None) -> dict[str, Any]:
    job = task.attempt.job
    spec = job.protocol["taskRoles"].get(task.role, {}).get("resourcePerInstance", {})
    limits = {"cpu": str(spec.get("cpu", 0)), "memory": f"{spec.get('memoryMB', 0)}Mi"}
    if spec.get("gpu"):
        limits["nvidia.com/gpu"] = str(spec["gpu"])
    started = seen.started_at if seen and seen.started_at else task.started_at
    return {
        "metadata": {
            "name": task.backend_ref.replace("/", "-"),
            "namespace": settings.K8S_NAMESPACE,
            "labels": {
                "userName": job.owner.username,
                "virtualCluster": job.virtual_cluster.name,
                "jobName": job.name,
                "taskRole": task.role,
                "taskIndex": str(task.index),
                "attemptIndex": str(task.attempt.number),
            },
            "annotations": {"backendRef": task.backend_ref},
        },
        "spec": {
            "nodeName": (seen.node if seen else "") or task.node or None,
            "containers": [{"name": "main", "resources": {"limits": limits}}],
        },
        "status": {
            "phase": PHASES[seen.phase] if seen else "Unknown",
            "hostIP": (seen.ip if seen else "") or task.ip or None,
            "podIP": (seen.ip if seen else "") or task.ip or None,
            "startTime": started.isoformat() if started else None,
        },
    }


def live_pods(backend: Backend, namespace: str | None = None) -> dict[str, Any]:
    """A ``PodList`` of the live tasks; another ``namespace`` than ours holds none."""
    tasks: list[Task] = []
    if namespace in (None, "", settings.K8S_NAMESPACE):
        tasks = list(
            Task.objects.filter(state__in=LIVE_TASK_STATES)
            .exclude(backend_ref="")
            .select_related("attempt__job__owner", "attempt__job__virtual_cluster")
            .order_by("id")[:MAX_PODS]
        )
    seen = backend.observe([t.backend_ref for t in tasks]) if tasks else {}
    return {
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {},
        "items": [pod_of(t, seen.get(t.backend_ref)) for t in tasks],
    }
