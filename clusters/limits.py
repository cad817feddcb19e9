"""Limits (a quota, a capacity) and what a demand lacks within them, as pure functions."""

from __future__ import annotations

from dataclasses import dataclass

from clusters.resources import ANY_GPU, Resources, gpu_label


@dataclass(frozen=True)
class Limit:
    """A quota or a capacity; ``None`` for a resource that is not limited."""

    cpu: int | None = None
    memory_mb: int | None = None
    gpus: dict[str, int] | None = None

    @classmethod
    def of(cls, r: Resources) -> Limit:
        return cls(r.cpu, r.memory_mb, dict(r.gpus))

    @property
    def unlimited(self) -> bool:
        return self.cpu is None and self.memory_mb is None and self.gpus is None


@dataclass(frozen=True)
class Shortfall:
    what: str  # "CPU", "MB memory", "GPU (V100)", "GPU"
    need: int
    free: int

    def __str__(self) -> str:
        return f"{self.need} {self.what}"


def shortfall(need: Resources, limit: Limit, used: Resources) -> Shortfall | None:
    """The first resource that ``need`` lacks within ``limit`` given ``used``; None if it fits."""
    short = shortfalls(need, limit, used, first_only=True)
    return short[0] if short else None


def shortfalls(
    need: Resources, limit: Limit, used: Resources, first_only: bool = False
) -> list[Shortfall]:
    """Every resource that ``need`` lacks within ``limit`` given ``used`` (the GPUs in total
    only when no GPU type is short already)."""
    checks: list[tuple[str, int, int | None, int]] = [
        ("CPU", need.cpu, limit.cpu, used.cpu),
        ("MB memory", need.memory_mb, limit.memory_mb, used.memory_mb),
    ]
    if limit.gpus is not None:
        for kind in sorted(k for k in need.gpus if k != ANY_GPU):
            checks.append(
                (gpu_label(kind), need.gpus[kind], limit.gpus.get(kind, 0), used.gpus.get(kind, 0))
            )
        checks.append(("GPU", need.gpu_total, sum(limit.gpus.values()), used.gpu_total))
    found: list[Shortfall] = []
    for what, wanted, cap, taken in checks:
        if wanted and cap is not None and wanted > cap - taken:
            if what == "GPU" and any(s.what.startswith("GPU (") for s in found):
                continue
            found.append(Shortfall(what, wanted, max(cap - taken, 0)))
            if first_only:
                break
    return found


def exceeds(used: Resources, limit: Limit) -> bool:
    """True when ``used`` is more than ``limit`` allows in any resource."""
    zero = Resources()
    return shortfall(zero, limit, zero) is None and shortfall(used, limit, zero) is not None


def never_fits(need: Resources, limit: Limit) -> list[Shortfall]:
    """Why ``need`` exceeds ``limit`` even when nothing else runs (``free`` = the limit): every
    resource short, not only the first (issue 28)."""
    return shortfalls(need, limit, Resources())


def ceiling(capacity: Limit, percent: float, floor: Limit | None = None) -> Limit:
    """``percent`` of each resource of ``capacity`` (rounded down; unlimited stays so), and
    never below ``floor`` (a VC's guarantee: max capacity only limits borrowing)."""
    if percent >= 100:
        return capacity
    low = floor or Limit()

    def part(n: int | None, least: int | None = None) -> int | None:
        return None if n is None else max(int(n * percent // 100), least or 0)

    low_gpus = low.gpus or {}
    gpus = (
        None
        if capacity.gpus is None
        else {k: part(v, low_gpus.get(k)) or 0 for k, v in capacity.gpus.items()}
    )
    return Limit(part(capacity.cpu, low.cpu), part(capacity.memory_mb, low.memory_mb), gpus)
