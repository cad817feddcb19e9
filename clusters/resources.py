"""What jobs ask for and nodes have: CPUs, memory and GPUs per type, added and subtracted."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field

ANY_GPU = ""  # GPUs without a type may use any type


@dataclass(frozen=True)
class Resources:
    cpu: int = 0
    memory_mb: int = 0
    gpus: dict[str, int] = field(default_factory=dict)  # GPU type ("" = any) -> count

    def __add__(self, other: Resources) -> Resources:
        gpus = dict(self.gpus)
        for kind, count in other.gpus.items():
            gpus[kind] = gpus.get(kind, 0) + count
        return Resources(self.cpu + other.cpu, self.memory_mb + other.memory_mb, gpus)

    def __sub__(self, other: Resources) -> Resources:
        gpus = dict(self.gpus)
        for kind, count in other.gpus.items():
            gpus[kind] = gpus.get(kind, 0) - count
        return Resources(self.cpu - other.cpu, self.memory_mb - other.memory_mb, gpus)

    @functools.cached_property
    def gpu_total(self) -> int:
        """Worked out once (a pass asks it of each node for each task it places); a
        ``Resources`` is never changed once made."""
        return sum(self.gpus.values())


def sum_of(items: Iterable[Resources]) -> Resources:
    """The sum of ``items``, added up in place (one object, not one per addition)."""
    cpu = memory = 0
    gpus: dict[str, int] = {}
    for r in items:
        cpu += r.cpu
        memory += r.memory_mb
        for kind, count in r.gpus.items():
            gpus[kind] = gpus.get(kind, 0) + count
    return Resources(cpu, memory, gpus)


def gpu_label(kind: str) -> str:
    return f"GPU ({kind})" if kind else "GPU"
