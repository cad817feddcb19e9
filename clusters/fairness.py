"""The order of a virtual cluster's queue: priority first, then dominant resource fairness
among its users (``clusters.quota``'s rules), then submission time; kept from one pass to the
next by the caller where nothing it depends on moved."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import TYPE_CHECKING, Any

from clusters.resources import Resources

if TYPE_CHECKING:  # quota's plan orders its queues here: its types only for the annotations
    from clusters.limits import Limit
    from clusters.quota import Waiting


def queue_order(job: Waiting) -> tuple[int, datetime, int]:
    """A user's own jobs: priority (high first), then submission time."""
    return (-job.priority, job.created_at, job.id)


def dominant_share(use: tuple[int, int, int], capacity: tuple[int, int, int]) -> float:
    """The largest fraction of the cluster's (CPU, memory, GPUs) that ``use`` holds of any."""
    return max((held / cap for held, cap in zip(use, capacity, strict=True) if cap), default=0.0)


def fair_order(jobs: list[Waiting], held: dict[str, Resources], capacity: Limit) -> list[Waiting]:
    """A VC's queue: priority first; within one priority, dominant resource fairness. Each of a
    user's jobs is keyed by the user's dominant share with what the user runs (``held``) and the
    user's jobs ahead of it, so users take turns, the one holding least first."""
    totals = (capacity.cpu or 0, capacity.memory_mb or 0, sum((capacity.gpus or {}).values()))
    keyed = []
    by_user: dict[str, list[Waiting]] = defaultdict(list)
    for job in jobs:
        by_user[job.user].append(job)
    for user, own in by_user.items():
        start = held.get(user, Resources())
        cpu, memory, gpus = start.cpu, start.memory_mb, start.gpu_total
        for job in sorted(own, key=queue_order):
            share = dominant_share((cpu, memory, gpus), totals)
            keyed.append(((-job.priority, share, job.created_at, job.id), job))
            cpu, memory = cpu + job.demand.cpu, memory + job.demand.memory_mb
            gpus += job.demand.gpu_total
    return [job for _, job in sorted(keyed, key=lambda pair: pair[0])]


def ordered(
    jobs: list[Waiting],
    held: dict[str, Resources],
    capacity: Limit,
    orders: dict[str, tuple[Any, list[Waiting]]] | None,
    vc: str,
) -> list[Waiting]:
    """``fair_order`` of a VC's queue, or the order ``orders`` kept for it when neither its
    jobs (the same objects: frozen, and kept alive by the entry) nor what its users hold nor
    the cluster moved: after a few jobs end, a pass orders again the few VCs they moved
    (ordering 100 queues of 10,000 jobs was 10-12 ms of a pass, ``bench/admission.py``)."""
    if orders is None:
        return fair_order(jobs, held, capacity)
    key = (
        tuple(map(id, jobs)),
        sorted((u, r.cpu, r.memory_mb, r.gpu_total) for u, r in held.items()),
        capacity,
    )
    kept = orders.get(vc)
    if kept is None or kept[0] != key:
        kept = orders[vc] = (key, fair_order(jobs, held, capacity))
    return kept[1]
