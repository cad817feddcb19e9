"""What a job asks for, read from its canonical protocol, and the plain forms a Job stores of it.

``clusters.quota`` decides with these; ``jobs.lifecycle`` stores them when a job is submitted.
"""

from __future__ import annotations

from typing import Any

from clusters.placement import TaskShape
from clusters.resources import Resources, sum_of

PRIORITY_CLASSES = {"crit": 1000, "prod": 100, "test": 10, "oppo": -1}


def gpu_type_of(protocol: dict[str, Any], role: str) -> str:
    """The GPU type a role asks for ("" = any): HiveD's per-role ``gpuType``, else v1's."""
    extras = protocol.get("extras") or {}
    hived_roles = (extras.get("hivedscheduler") or {}).get("taskRoles") or {}
    v1_type = (extras.get("v1") or {}).get("gpuType")
    return str((hived_roles.get(role) or {}).get("gpuType") or v1_type or "")


def tasks_of(protocol: dict[str, Any]) -> tuple[TaskShape, ...]:
    """What a canonical job asks for, role by role: (role, instances, per instance)."""
    shapes = []
    for role, spec in protocol["taskRoles"].items():
        per = spec["resourcePerInstance"]
        kind = gpu_type_of(protocol, role)
        gpus = {kind: int(per["gpu"])} if per["gpu"] else {}
        shapes.append(
            (role, int(spec["instances"]), Resources(int(per["cpu"]), int(per["memoryMB"]), gpus))
        )
    return tuple(shapes)


def demand_of(protocol: dict[str, Any]) -> Resources:
    """What a canonical job asks for in total: every instance of every role."""
    return sum_of(
        Resources(n * per.cpu, n * per.memory_mb, {k: n * c for k, c in per.gpus.items()})
        for _, n, per in tasks_of(protocol)
    )


def options_of(protocol: dict[str, Any]) -> tuple[int, bool]:
    """``(priority, opportunistic)`` from ``extras``.

    ``extras.priority`` (an integer) and ``extras.opportunistic`` (a boolean) win; HiveD's
    ``extras.hivedscheduler.jobPriorityClass`` is understood too (``oppo`` is opportunistic).
    """
    extras = protocol.get("extras") or {}
    klass = str((extras.get("hivedscheduler") or {}).get("jobPriorityClass") or "")
    priority = PRIORITY_CLASSES.get(klass, 0)
    if isinstance(extras.get("priority"), int) and not isinstance(extras["priority"], bool):
        priority = extras["priority"]
    opportunistic = extras.get("opportunistic") is True or klass == "oppo"
    return priority, opportunistic


# -- the plain forms of what the models store ---------------------------------------------------


def resources_json(r: Resources) -> dict[str, Any]:
    return {"cpu": r.cpu, "memoryMB": r.memory_mb, "gpus": dict(r.gpus)}


def resources_of(data: dict[str, Any] | None) -> Resources:
    data = data or {}
    return Resources(
        int(data.get("cpu", 0)), int(data.get("memoryMB", 0)), dict(data.get("gpus") or {})
    )


def demand_json(protocol: dict[str, Any]) -> dict[str, Any]:
    """What a Job stores of its demand: the total, and its tasks by role (``tasks_of``)."""
    tasks = [[role, n, resources_json(per)] for role, n, per in tasks_of(protocol)]
    return {**resources_json(demand_of(protocol)), "tasks": tasks}


def shapes_of(data: dict[str, Any] | None) -> tuple[TaskShape, ...]:
    """The tasks a Job's stored demand lists (none for a job stored before they were)."""
    return tuple(
        (role, int(n), resources_of(per)) for role, n, per in (data or {}).get("tasks") or ()
    )
