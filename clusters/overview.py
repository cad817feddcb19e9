"""What pages and the API show of virtual clusters: use (``VCView``, filled in by
``jobs.vc_usage``), guarantees, capacity, validation."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from clusters.capacity import cluster_capacity
from clusters.limits import Limit
from clusters.models import VirtualCluster
from clusters.quota import guarantee, quota_of
from clusters.resources import Resources, gpu_label, sum_of


@dataclass
class Bar:
    label: str
    used: int
    guaranteed: int | None
    total: int
    shared: bool = False  # ``guaranteed`` is the rest no VC guarantees, shared (clusters.quota)

    def percent(self, value: int | None) -> int:
        top = max(self.total, self.guaranteed or 0, self.used, 1)
        return min(100, round(100 * (value or 0) / top))

    @property
    def used_pct(self) -> int:
        return self.percent(self.used)

    @property
    def guaranteed_pct(self) -> int:
        return self.percent(self.guaranteed)


@dataclass
class VCView:
    vc: VirtualCluster
    quota: Limit
    used: Resources = field(default_factory=Resources)
    borrowed: Resources = field(default_factory=Resources)
    running: int = 0
    waiting: int = 0
    shared: Limit = field(default_factory=Limit)  # the rest no VC guarantees (unguaranteed)
    unmet: list[str] = field(default_factory=list)  # why its guarantee no longer fits (unmet)

    def bars(self, capacity: Limit) -> list[Bar]:
        """Use against the guarantee, per resource: the quota where one is set, else the share
        of the rest no VC guarantees, which this VC holds with every VC that sets none."""
        quota = self.quota
        promised = guarantee(quota, self.shared)
        gpus = promised.gpus or {}
        types = sorted(set(gpus) | set(capacity.gpus or {}) | set(self.used.gpus))
        rows = [
            Bar("CPU", self.used.cpu, promised.cpu, capacity.cpu or 0, quota.cpu is None),
            Bar(
                "memory (MB)",
                self.used.memory_mb,
                promised.memory_mb,
                capacity.memory_mb or 0,
                quota.memory_mb is None,
            ),
        ]
        for kind in types:
            guaranteed = None if promised.gpus is None else gpus.get(kind, 0)
            total = (capacity.gpus or {}).get(kind, 0)
            used = self.used.gpus.get(kind, 0)
            label = f"GPU ({kind or 'any type'})"
            rows.append(Bar(label, used, guaranteed, total, quota.gpus is None))
        return rows


def guaranteed_sum(quotas: dict[str, Limit]) -> Resources:
    return sum_of(
        Resources(q.cpu or 0, q.memory_mb or 0, dict(q.gpus or {})) for q in quotas.values()
    )


def unmet(quotas: dict[str, Limit], capacity: Limit) -> dict[str, list[str]]:
    """The VCs whose guarantee the cluster can no longer give (it lost a node, a GPU): for each
    resource whose guarantees add up to more than the capacity, every VC guaranteeing some of
    it, with the amounts. Edits cannot over-commit (``over_capacity``); a shrinking cluster can.
    """
    if capacity.unlimited:
        return {}
    total = guaranteed_sum(quotas)
    rows: list[tuple[str, int, int, Callable[[Limit], int]]] = [
        ("CPU", total.cpu, capacity.cpu or 0, lambda q: q.cpu or 0),
        ("MB memory", total.memory_mb, capacity.memory_mb or 0, lambda q: q.memory_mb or 0),
    ]
    for kind in sorted(total.gpus):
        have = (capacity.gpus or {}).get(kind, 0)
        rows.append(
            (gpu_label(kind), total.gpus[kind], have, lambda q, k=kind: (q.gpus or {}).get(k, 0))
        )
    found: dict[str, list[str]] = {}
    for what, promised, have, part in rows:
        if promised <= have:
            continue
        for name, quota in sorted(quotas.items()):
            if part(quota):
                found.setdefault(name, []).append(
                    f"its guarantee of {part(quota)} {what} can no longer be met: the virtual "
                    f"clusters guarantee {promised} in all and the cluster has {have}"
                )
    return found


def over_capacity(pk: int | None, quota: Limit, capacity: Limit | None = None) -> list[str]:
    """Why giving the virtual cluster ``pk`` (None: a new one) the guarantee ``quota`` would
    take more than the cluster has; by primary key, so a renamed one is not counted twice.

    Each line says by how much the sum of guaranteed quotas would exceed capacity. A resource
    a quota leaves unlimited counts as 0: it guarantees nothing, and its jobs are bounded by
    the cluster's free capacity at admission. Capacity is unknown (nothing checked) only when
    the backend cannot report it (see ``cluster_capacity``).
    """
    cap = capacity or cluster_capacity()
    if cap.unlimited:
        return []
    others = VirtualCluster.objects.exclude(pk=pk) if pk is not None else VirtualCluster.objects
    quotas = {str(vc.pk): quota_of(vc) for vc in others.all()}
    quotas["this"] = quota
    total = guaranteed_sum(quotas)
    problems = []
    pairs: list[tuple[str, int, int]] = [
        ("cpu", total.cpu, cap.cpu or 0),
        ("memoryMB", total.memory_mb, cap.memory_mb or 0),
    ]
    pairs += [(f"gpus.{k}", n, (cap.gpus or {}).get(k, 0)) for k, n in sorted(total.gpus.items())]
    known = sorted(cap.gpus or {})
    for kind in sorted(k for k, n in (quota.gpus or {}).items() if n and k not in known):
        problems.append(
            f"gpus.{kind}: the cluster has no GPU of type {kind!r} "
            f"(it has {', '.join(known) or 'no GPUs'})"
        )
    for what, want, have in pairs:
        if want > have:
            problems.append(
                f"{what}: guaranteed quotas would sum to {want}, {want - have} more than "
                f"the cluster's {have}"
            )
    return problems
