"""Placement on nodes, decided as pure functions: does a job's every task find a node at once?

A task needs its CPUs, memory and GPUs on one node (a 4-GPU task needs 4 free GPUs of its type
on one node), and a job starts only when all its tasks fit together (gang placement, as
Kueue's and HiveD's gangs, Slurm's allocation of a whole job). ``clusters.quota.plan`` checks
totals first (quota, cluster) and asks here only for the jobs that pass them, so a pass over
thousands of waiting jobs places a few.

Tasks are placed largest first, each on the node it fits most tightly (best fit), which keeps
whole nodes free for large tasks. What the portal decides is a gate: the backend (the local
machine, Kubernetes' scheduler) still places the pods; where it did, ``Task.node`` says so and
the plan counts the task there.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clusters.resources import ANY_GPU, Resources, gpu_label

if TYPE_CHECKING:  # quota's plan counts its running jobs here: their type for the annotations
    from clusters.holdings import Holdings
    from clusters.quota import Running

# (role, instances, per instance): what a job asks for, task by task
TaskShape = tuple[str, int, Resources]
Use = dict[str, Resources]  # node -> what a job's tasks hold there


def fits(need: Resources, free: Resources) -> bool:
    """True when one node with ``free`` room holds a task needing ``need``."""
    # GPUs of any type come out of all of them; the totals first, which rule out a full node
    # at once (a pass tries every node for each task it places)
    if need.gpu_total > free.gpu_total or need.cpu > free.cpu or need.memory_mb > free.memory_mb:
        return False
    return all(n <= free.gpus.get(k, 0) for k, n in need.gpus.items() if k != ANY_GPU)


def size(shape: TaskShape) -> tuple[int, int, int]:
    per = shape[2]
    return (per.gpu_total, per.cpu, per.memory_mb)


def place(tasks: Iterable[TaskShape], free: dict[str, Resources]) -> Use | None:
    """Where every task would go (node -> what it takes there), or None when one finds no
    node. ``free`` is not changed."""
    room = dict(free)
    use: Use = {}
    for _, count, per in sorted(tasks, key=size, reverse=True):
        for _ in range(count):
            best = None
            for node, left in room.items():
                if fits(per, left) and (best is None or tightness(left) < tightness(room[best])):
                    best = node
            if best is None:
                return None
            room[best] = room[best] - per
            use[best] = use.get(best, Resources()) + per
    return use


def tightness(free: Resources) -> tuple[int, int, int]:
    return (free.gpu_total, free.cpu, free.memory_mb)


def take(free: dict[str, Resources], use: Use) -> None:
    for node, part in use.items():
        if node in free:
            free[node] = free[node] - part


def give(free: dict[str, Resources], use: Use) -> None:
    for node, part in use.items():
        if node in free:
            free[node] = free[node] + part


def overdrawn(free: Resources) -> bool:
    """True when a node holds more than it has: GPUs of no type ("", below 0 once such a task
    is placed) count against the node's GPUs in all, as in ``fits``."""
    typed = (n for k, n in free.gpus.items() if k != ANY_GPU)
    return free.cpu < 0 or free.memory_mb < 0 or free.gpu_total < 0 or any(n < 0 for n in typed)


@dataclass
class Rooms:
    """Free room per node during a pass: ``free`` after every running job, ``unheld`` after
    the guaranteed ones only (what preempting every borrower would give), and where each
    borrower's tasks are (what preempting it gives back)."""

    free: dict[str, Resources]
    unheld: dict[str, Resources]
    where: dict[int, Use]


@dataclass(frozen=True)
class NodeShortfall:
    role: str
    what: str  # "CPU", "MB memory", "GPU (V100)", "GPU", or "" when no resource alone is short
    need: int
    most: int  # the most of it free on one node
    node: str

    def __str__(self) -> str:
        if not self.what:
            return (
                f"waiting for one node to hold a task of '{self.role}': each resource is free "
                "on some node, but not all on one"
            )
        return (
            f"waiting for a node with {self.need} {self.what} free for a task of "
            f"'{self.role}': the most on one node is {self.most} ({self.node})"
        )


def amounts(per: Resources, free: Resources) -> dict[str, tuple[int, int]]:
    """what -> (needed, free on a node with ``free``) for each resource a task asks for."""
    rows = {gpu_label(k): (n, free.gpus.get(k, 0)) for k, n in sorted(per.gpus.items()) if k}
    if per.gpus.get(ANY_GPU):
        rows["GPU"] = (per.gpu_total, free.gpu_total)
    rows["CPU"] = (per.cpu, free.cpu)
    rows["MB memory"] = (per.memory_mb, free.memory_mb)
    return rows


def failing(ordered: list[TaskShape], room: dict[str, Resources]) -> tuple[str, Resources]:
    """The first task, one instance at a time, that finds no node in ``room`` (which keeps
    the ones placed before it)."""
    for role, count, per in ordered:
        for _ in range(count):
            placed = place([(role, 1, per)], room)
            if placed is None:
                return role, per
            take(room, placed)
    return ordered[0][0], ordered[0][2]


def shortfall_by_node(tasks: Iterable[TaskShape], free: dict[str, Resources]) -> NodeShortfall:
    """Why ``place`` failed: for the first task (largest first) that finds no node once the
    larger ones are placed, the resource no node has enough of and where the most of it is
    (or that each is free somewhere but not together). Call only when ``place`` returned None."""
    room = dict(free)
    ordered = sorted(tasks, key=size, reverse=True)
    role, per = failing(ordered, room)
    for what, (need, _) in amounts(per, Resources()).items():
        if not need:
            continue
        node = max(room, key=lambda name: amounts(per, room[name])[what][1], default="")
        most = amounts(per, room[node])[what][1] if node else 0
        if most < need:
            return NodeShortfall(role, what, need, max(most, 0), node)
    return NodeShortfall(role, "", 0, 0, "")


def rooms_of(nodes: dict[str, Resources], running: list[Running], holdings: Holdings) -> Rooms:
    """The nodes' free room once every running job is counted where its tasks are: where the
    backend placed them (``holdings``: what ``running`` holds), else where they would go (best
    fit, after all known placements)."""
    where = {job.id: dict(job.placed) for job in running if job.borrowing}
    rooms = Rooms({}, {}, where)
    for node, cap in nodes.items():
        rooms.free[node], rooms.unheld[node] = holdings.room(node, cap)
    for job in running:
        use = place(job.unplaced, rooms.free) if job.unplaced else None
        if not use:
            continue
        take(rooms.free, use)
        if not job.borrowing:
            take(rooms.unheld, use)
            continue
        mine = rooms.where[job.id]
        for node, part in use.items():
            mine[node] = mine.get(node, Resources()) + part
    return rooms
