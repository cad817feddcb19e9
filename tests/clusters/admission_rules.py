"""The rules ``test_admission_simulation`` checks after every pass (its docstring says them,
(a) to (e)), and the amounts they are checked in: kept apart from the state machine that drives
the passes, so that each reads in one sitting."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clusters.fairness import dominant_share, fair_order, queue_order
from clusters.limits import Limit, ceiling, shortfall
from clusters.placement import TaskShape
from clusters.quota import Plan, Running, Waiting, charged, guarantee, shared_part
from clusters.resources import ANY_GPU, Resources, gpu_label, sum_of

Amounts = dict[str, int]

if TYPE_CHECKING:
    from tests.clusters.test_admission_simulation import Admission


# -- amounts ----------------------------------------------------------------------------------


def amounts(r: Resources) -> Amounts:
    """CPU, memory, GPUs of each type and GPUs in all (those of no type count there only)."""
    out = {"CPU": r.cpu, "MB memory": r.memory_mb, "GPU": r.gpu_total}
    out.update({gpu_label(k): n for k, n in r.gpus.items() if k != ANY_GPU})
    return out


def limit_amounts(limit: Limit) -> dict[str, int | None]:
    """A limit's amounts; None is unlimited, a GPU type it does not name has none."""
    out: dict[str, int | None] = {"CPU": limit.cpu, "MB memory": limit.memory_mb}
    if limit.gpus is not None:
        out["GPU"] = sum(limit.gpus.values())
        out.update({gpu_label(k): n for k, n in limit.gpus.items() if k != ANY_GPU})
    return out


def beyond(used: Resources, limit: Limit, before: Resources) -> list[str]:
    """The amounts of ``used`` over both ``limit`` and ``before`` (what was already there)."""
    caps, was = limit_amounts(limit), amounts(before)
    unlimited_gpus = limit.gpus is None
    found = []
    for what, n in amounts(used).items():
        cap = caps.get(what, None if unlimited_gpus and what.startswith("GPU") else 0)
        if cap is not None and n > max(cap, was.get(what, 0)):
            found.append(f"{n} {what} of {cap} (before: {was.get(what, 0)})")
    return found


def demand(tasks: Iterable[TaskShape]) -> Resources:
    return sum_of(
        Resources(n * per.cpu, n * per.memory_mb, {k: n * c for k, c in per.gpus.items()})
        for _, n, per in tasks
    )


def no_larger(x: Waiting, y: Waiting, by_tasks: bool) -> bool:
    """True when ``x`` asks for no more than ``y``: every amount (GPUs of each type as asked);
    with ``by_tasks`` (placement on nodes), the very same tasks."""
    if by_tasks:
        return Counter(task_key(t) for t in x.tasks) == Counter(task_key(t) for t in y.tasks)
    a, b = x.demand, y.demand
    return (
        a.cpu <= b.cpu
        and a.memory_mb <= b.memory_mb
        and all(n <= b.gpus.get(k, 0) for k, n in a.gpus.items())
    )


def task_key(task: TaskShape) -> tuple[int, int, int, tuple[tuple[str, int], ...]]:
    _, n, per = task
    return (n, per.cpu, per.memory_mb, tuple(sorted(per.gpus.items())))


def adds_up(quotas: Iterable[Limit], capacity: Limit) -> bool:
    """The guarantees fit the cluster (an admin's edit that over-commits is refused, item 1)."""
    total = sum_of(Resources(q.cpu or 0, q.memory_mb or 0, dict(q.gpus or {})) for q in quotas)
    return not beyond(total, capacity, Resources())


# -- what a pass decided ----------------------------------------------------------------------


@dataclass
class After:
    """The cluster once a pass is applied: what runs, where, and against which guarantee."""

    capacity: Limit
    shared: Limit  # what no VC's quota guarantees (the VCs without one share it)
    total: Resources  # every running job
    held: Resources  # the guaranteed ones
    used: dict[str, Resources]  # VC -> its guaranteed jobs
    borrowed: dict[str, Resources]  # VC -> its borrowers
    shared_use: Resources  # what guaranteed jobs hold of the shared rest
    free: dict[str, Resources]  # node -> its capacity less every task on it
    unheld: dict[str, Resources]  # node -> its capacity less the guaranteed jobs' tasks


def vc_order(
    vc: str, before: dict[int, Running], queued: dict[int, Waiting], capacity: Limit
) -> list[Waiting]:
    """A VC's queue when the pass began (``fair_order`` as this module imported it)."""
    mine = [j for j in queued.values() if j.vc == vc]
    return fair_order(mine, users_held(vc, before), capacity)


def users_held(vc: str, before: dict[int, Running]) -> dict[str, Resources]:
    """What each user's jobs in ``vc`` held when the pass began, borrowed too."""
    held: dict[str, Resources] = defaultdict(Resources)
    for run in before.values():
        if run.vc == vc:
            held[run.user] = held[run.user] + run.demand
    return held


# -- the rules checked ------------------------------------------------------------------------


def check_no_over_commit(
    sim: Admission, before: dict[int, Running], decided: Plan, after: After
) -> None:
    """(a): the cluster, each node, each VC's guarantee, and its max capacity where it
    borrowed in this pass."""
    stayed = [j for i, j in before.items() if i in sim.running]
    over = beyond(after.total, after.capacity, sum_of(j.demand for j in stayed))
    assert not over, f"(a) over-commit of the cluster: {over}"
    room = sim.free(stayed)
    for node, cap in sim.nodes.items():
        over = beyond(cap - after.free[node], Limit.of(cap), cap - room[node])
        assert not over, f"(a) over-commit of node {node}: {over}"
    kept = [j for j in stayed if not j.borrowing]
    shared_before = sum_of(shared_part(sim.queues[j.vc].quota, j.demand) for j in kept)
    for name, q in sim.queues.items():
        was = charged(q.quota, sum_of(j.demand for j in kept if j.vc == name), shared_before)
        now = charged(q.quota, after.used[name], after.shared_use)
        over = beyond(now, guarantee(q.quota, after.shared), was)
        assert not over, f"(a) over-commit of the guarantee of '{name}': {over}"
        if any(sim.running[i].vc == name for i in decided.borrow):
            most = ceiling(after.capacity, q.max_capacity, guarantee(q.quota, after.shared))
            held = sum_of(j.demand for j in stayed if j.vc == name)
            over = beyond(after.used[name] + after.borrowed[name], most, held)
            assert not over, f"(a) '{name}' borrowed beyond its max capacity: {over}"


def check_reclaim(sim: Admission, before: dict[int, Running], decided: Plan, after: After) -> None:
    """(e): only borrowers, only for a guaranteed job, and none whose room was not needed."""
    if not decided.preempt:
        return
    started = [i for i in decided.admit if i not in decided.borrow]
    assert started, f"(e) reclaim: {sorted(decided.preempt)} preempted, no guaranteed job started"
    for i in decided.preempt:
        assert before[i].borrowing, f"(e) reclaim: job {i}, guaranteed, was preempted"
    if len(started) > 1:
        return  # a later reclaim may free what an earlier one took: minimal per job only
    # what runs once the reclaim is over: all but the borrowers started after it
    kept = [j for j in sim.running.values() if j.id not in decided.borrow]
    total, room = sum_of(j.demand for j in kept), sim.free(kept)
    if beyond(total, after.capacity, Resources()) or any(
        beyond(cap - room[n], Limit.of(cap), Resources()) for n, cap in sim.nodes.items()
    ):
        return  # over-committed already (the cluster shrank): no preemption can mend it
    for i in decided.preempt:
        victim = before[i]
        needed = beyond(total + victim.demand, after.capacity, Resources()) or any(
            beyond(sim.nodes[n] - room[n] + part, Limit.of(sim.nodes[n]), Resources())
            for n, part in victim.placed.items()
            if n in sim.nodes
        )
        assert needed, f"(e) reclaim: borrower {i} was preempted; the room it held was not needed"


def check_guaranteed_service(
    sim: Admission, owed: list[Waiting], decided: Plan, after: After
) -> None:
    """(b), with what runs once the pass is applied."""
    for job in owed:
        q = sim.queues[job.vc]
        mine = charged(q.quota, after.used[job.vc], after.shared_use)
        if (
            shortfall(job.demand, guarantee(q.quota, after.shared), mine) is None
            and shortfall(job.demand, after.capacity, after.held) is None
            and sim.fits_nodes(job, after.unheld)
        ):
            raise AssertionError(
                f"(b) guaranteed service: job {job.id} of '{job.vc}' fits its free guarantee "
                f"and the cluster without borrowers, and waits: {decided.waiting.get(job.id)}"
            )


def check_work_conservation(
    sim: Admission, owed: list[Waiting], decided: Plan, after: After
) -> None:
    """(c), with what runs once the pass is applied."""
    for job in owed:
        q = sim.queues[job.vc]
        most = ceiling(after.capacity, q.max_capacity, guarantee(q.quota, after.shared))
        mine = after.used[job.vc] + after.borrowed[job.vc]
        if (
            shortfall(job.demand, after.capacity, after.total) is None
            and shortfall(job.demand, most, mine) is None
            and sim.fits_nodes(job, after.free)
        ):
            raise AssertionError(
                f"(c) work conservation: job {job.id} of '{job.vc}' fits the idle room it may "
                f"borrow, and waits: {decided.waiting.get(job.id)}"
            )


def check_fairness(
    sim: Admission, before: dict[int, Running], queued: dict[int, Waiting], decided: Plan
) -> None:
    """(d), from the queue as it stood when the pass began."""
    started, capacity = set(decided.admit), sim.capacity()
    totals = (capacity.cpu or 0, capacity.memory_mb or 0, sum((capacity.gpus or {}).values()))
    for vc in {j.vc for j in queued.values()}:
        held = users_held(vc, before)
        mine = [j for j in queued.values() if j.vc == vc]
        share: dict[int, float] = {}  # its user's dominant share with their jobs ahead of it
        for user in {j.user for j in mine}:
            ahead = held[user]
            for job in sorted((j for j in mine if j.user == user), key=queue_order):
                share[job.id] = dominant_share(
                    (ahead.cpu, ahead.memory_mb, ahead.gpu_total), totals
                )
                ahead = ahead + job.demand
        for x in (j for j in mine if j.id in sim.waiting):
            for y in (j for j in mine if j.id in started):
                if (
                    y.user != x.user
                    and y.priority == x.priority
                    and no_larger(x, y, by_tasks=len(sim.nodes) > 1)
                    and (share[x.id], x.created_at, x.id) < (share[y.id], y.created_at, y.id)
                ):
                    raise AssertionError(
                        f"(d) fairness: {x.user}'s job {x.id} (share {share[x.id]:.2f}) waits; "
                        f"{y.user}'s job {y.id}, no smaller (share {share[y.id]:.2f}), started"
                    )
