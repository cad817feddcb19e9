"""Admission decided as pure functions: quotas, queues, reasons, positions and preemption.

No Django here: ``jobs.lifecycle.admit`` loads plain data, calls :func:`plan`, and applies it.

Rules:
* Each virtual cluster (VC) guarantees a quota (cpu, memoryMB, GPUs per type). A resource a VC
  sets no quota for (``None``: the ``default`` VC, a VC made without one) is guaranteed out of
  what no VC guarantees: the cluster's capacity less every set quota, shared by all the VCs
  without one (issue 27: one unlimited VC counted all its jobs as guaranteed and cancelled
  every other VC's guarantee). Jobs that fit their VC's guarantee are *guaranteed*.
* Per VC, waiting jobs go by priority (high first); among jobs of one priority, the user with
  the smallest dominant share goes first (dominant resource fairness, DRF, as in Kueue's fair
  sharing and YARN's DRF policy): a user's share is the largest fraction of the cluster's CPU,
  memory or GPUs that the user's running jobs in the VC hold, counting also that user's jobs
  queued ahead, so one user's 1,000 jobs interleave with another's one instead of going first;
  then submission time (``clusters.fairness``). Best-effort FIFO (default): a job that does
  not fit does not block the ones behind it; strict FIFO: it does.
* Whatever its quota says, a job is only admitted while the cluster has room for it: the
  cluster's capacity minus what running guaranteed jobs of every VC use (an unlimited VC is
  bounded by the cluster, not by a quota of its own).
* A job that does not fit its VC's guarantee may run on idle capacity (the cluster's capacity
  minus everything running); it is then *borrowing*, and preemptible (Kueue's borrowing within
  a cohort, YARN's maximum-capacity; HiveD lets only ``oppo`` jobs do it). In a strict-FIFO VC
  only the job at the head of the queue may borrow (as in Kueue, where borrowing and the
  queueing strategy are independent); those behind it wait for it. When a guaranteed job needs
  room that borrowers hold, borrowers that hold some of the missing resources are preempted
  (lowest priority, newest first), and no more of them than needed.
  Guaranteed jobs are never preempted.
* GPUs without a type ("") may use any type: they count against the total over all types.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from clusters import fairness
from clusters.holdings import Holdings
from clusters.limits import Limit, ceiling, exceeds, shortfall
from clusters.placement import (
    Rooms,
    TaskShape,
    Use,
    give,
    overdrawn,
    place,
    rooms_of,
    shortfall_by_node,
    take,
)
from clusters.resources import ANY_GPU, Resources, sum_of

# -- the plan -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Queue:
    name: str
    quota: Limit
    strict_fifo: bool = False
    # OpenPAI's vcMaxCapacity: the most of the cluster (percent of each resource) the VC's jobs
    # may hold, guaranteed and borrowed together (Kueue's borrowingLimit, YARN's
    # maximum-capacity); 100 borrows up to the whole cluster.
    max_capacity: float = 100.0


@dataclass(frozen=True)
class Waiting:
    id: int
    vc: str
    demand: Resources
    created_at: datetime
    priority: int = 0
    opportunistic: bool = False
    preempted: bool = False  # ran before and was sent back to the queue
    label: str = ""
    user: str = ""  # whose job: fairness among a VC's users
    tasks: tuple[TaskShape, ...] = ()  # by role; none known: one task of the whole demand

    @functools.cached_property
    def shape(self) -> str:
        """What admission's answers for the job depend on besides its VC: its demand and tasks
        (worked out once: a process keeps its waiting jobs between passes). Text, whose hash
        Python keeps: a pass looks it up for each of thousands of jobs, and hashing the nested
        tuple it is made of each time was a fifth of a pass."""
        demand = self.demand
        tasks = tuple(
            (role, n, per.cpu, per.memory_mb, *per.gpus.items()) for role, n, per in self.tasks
        )
        return repr((demand.cpu, demand.memory_mb, *demand.gpus.items(), tasks))


@dataclass(frozen=True)
class Running:
    id: int
    vc: str
    demand: Resources
    created_at: datetime
    priority: int = 0
    borrowing: bool = False
    user: str = ""
    placed: Use = field(default_factory=dict)  # node -> what its tasks hold there, where known
    unplaced: tuple[TaskShape, ...] = ()  # its tasks on no known node yet (a pending pod)


def unguaranteed(quotas: Iterable[Limit], capacity: Limit) -> Limit:
    """What no VC guarantees: the capacity less every quota set, per resource (never below 0);
    the VCs without a quota of that resource share it."""
    cpu, memory, gpus = capacity.cpu, capacity.memory_mb, dict(capacity.gpus or {})
    for quota in quotas:
        cpu = None if cpu is None else cpu - (quota.cpu or 0)
        memory = None if memory is None else memory - (quota.memory_mb or 0)
        for kind, count in (quota.gpus or {}).items():
            gpus[kind] = gpus.get(kind, 0) - count
    return Limit(
        None if cpu is None else max(cpu, 0),
        None if memory is None else max(memory, 0),
        None if capacity.gpus is None else {k: max(n, 0) for k, n in gpus.items()},
    )


def guarantee(quota: Limit, shared: Limit) -> Limit:
    """A VC's guarantee: its quota, and the shared rest for each resource it sets none of."""
    return Limit(
        shared.cpu if quota.cpu is None else quota.cpu,
        shared.memory_mb if quota.memory_mb is None else quota.memory_mb,
        shared.gpus if quota.gpus is None else quota.gpus,
    )


def shared_part(quota: Limit, demand: Resources) -> Resources:
    """The part of ``demand`` counted against the shared rest (the resources ``quota`` lacks)."""
    return Resources(
        demand.cpu if quota.cpu is None else 0,
        demand.memory_mb if quota.memory_mb is None else 0,
        dict(demand.gpus) if quota.gpus is None else {},
    )


def charged(quota: Limit, own: Resources, shared_use: Resources) -> Resources:
    """What counts against a VC's guarantee: its own use of what it has a quota of, and every
    VC's use of the shared rest for the others."""
    return Resources(
        shared_use.cpu if quota.cpu is None else own.cpu,
        shared_use.memory_mb if quota.memory_mb is None else own.memory_mb,
        dict(shared_use.gpus) if quota.gpus is None else dict(own.gpus),
    )


JOBS_AHEAD = {1: "no job ahead", 2: "1 job ahead"}


@dataclass
class Plan:
    admit: list[int] = field(default_factory=list)
    borrow: set[int] = field(default_factory=set)  # admitted on idle capacity, preemptible
    preempt: dict[int, str] = field(default_factory=dict)  # running job id -> reason
    placed: dict[int, Use] = field(default_factory=dict)  # admitted job -> its nodes, where known
    waiting: dict[int, tuple[str, int]] = field(default_factory=dict)  # id -> (reason, position)
    left: int = 0  # jobs still waiting after the pass (told where they stand or not)


def plan(
    queues: Iterable[Queue],
    capacity: Limit,
    running: Iterable[Running],
    waiting: Iterable[Waiting],
    max_admit: int | None = None,
    nodes: dict[str, Resources] | None = None,
    orders: dict[str, tuple[Any, list[Waiting]]] | None = None,
    standing: bool = True,
    holdings: Holdings | None = None,
    told: dict[str, Any] | None = None,
) -> Plan:
    """Decide one admission pass; see the module's rules. With ``nodes`` (their capacity, two
    or more), every task of an admitted job must also find room on one node
    (``clusters.placement``). ``orders``: where the caller keeps each VC's queue order from
    one pass to the next (``ordered``). Without ``standing``, the jobs left waiting are
    counted but not told why and where (a third of a pass with 10,000 waiting). ``holdings``:
    where the caller keeps what the running jobs hold from one pass to the next; ``told``: each
    VC's standing (``stand``)."""
    running = list(running)
    kept = Holdings() if holdings is None else holdings
    kept.update(running)
    rooms = rooms_of(nodes, running, kept) if nodes and len(nodes) > 1 else None
    by_name = {q.name: q for q in queues}
    shared = unguaranteed((q.quota for q in by_name.values()), capacity)
    result = Plan()
    # what each VC's guaranteed jobs hold, and its borrowers: added to as the pass admits
    used: dict[str, Resources] = defaultdict(Resources, kept.own)
    borrowed: dict[str, Resources] = defaultdict(Resources, kept.lent)
    borrowers = [run for run in running if run.borrowing]
    # what guaranteed jobs hold of the shared rest
    shared_use = sum_of(
        shared_part(by_name[vc].quota if vc in by_name else Limit(), use)
        for vc, use in used.items()
    )
    held = sum_of(used.values())  # what guaranteed jobs hold: not the borrowers (preemptible)
    total = held + sum_of(borrowed.values())  # everything running or admitted
    borrowers.sort(key=preemption_order)
    queued: dict[str, list[Waiting]] = defaultdict(list)
    kinds_of: dict[str, dict[str, Waiting]] = defaultdict(dict)  # per VC: a job of each shape
    for w in waiting:
        queued[w.vc].append(w)
        kinds_of[w.vc][w.shape] = w
    result.left = sum(map(len, queued.values()))
    notes: dict[str, dict[int, str]] = defaultdict(dict)  # per VC: job -> why it waits
    moved: set[str] = set()  # the VCs a job was admitted from
    later: dict[str, list[Waiting]] = defaultdict(list)  # per VC: to borrow after the guaranteed
    later_kinds: dict[str, dict[str, Resources]] = defaultdict(dict)  # their shapes
    queue_of = {name: by_name.get(name) or Queue(name, Limit()) for name in queued}
    for name in queued:
        queued[name] = fairness.ordered(
            queued[name], kept.users.get(name, {}), capacity, orders, name
        )
    if orders is not None:
        for gone in orders.keys() - queued.keys():
            del orders[gone]  # a VC with no job waiting any more
    if told is not None:
        for gone in told.keys() - queued.keys():
            del told[gone]
    # Thousands of waiting jobs come in a few shapes: what one job of a VC was told holds for
    # the next of the same shape until a job is admitted (which changes what is free), so
    # each answer below is kept per (VC, shape) and forgotten on every admission; once every
    # shape of a VC has its answer and none is admitted, the VC's other jobs are decided
    # together (what a pass costs with 10,000 jobs waiting in full VCs).
    answers: dict[tuple[Any, ...], Any] = {}
    for name in sorted(queued):
        queue = queue_of[name]
        own = guarantee(queue.quota, shared)
        jobs, kinds = queued[name], kinds_of[name]
        for at, job in enumerate(jobs):
            key = (name, job.shape)
            fresh = key not in answers
            if fresh:  # for every shape of the VC at once: each holds for all its jobs
                counted = charged(queue.quota, used[name], shared_use)
                for kind, one in kinds.items():
                    answers[name, kind] = shortfall(one.demand, own, counted) or shortfall(
                        one.demand, capacity, held
                    )
            short = answers[key]
            if short is None and max_admit is not None and len(result.admit) >= max_admit:
                notes[name][job.id] = "fits; starts in the next pass"
                continue
            use: Use = {}
            if short is None and rooms is not None:
                # Where a shape found no node, the next job of that shape finds none either
                # until an admission moves the rooms (each try reads every node).
                unplaced = ("no node", job.shape)
                found = None
                if unplaced not in answers:
                    found = place(shapes(job), rooms.free) or place(shapes(job), rooms.unheld)
                if found is None:  # not even were every borrower gone: fragmentation
                    if unplaced not in answers:
                        answers[unplaced] = no_node(job, rooms.unheld, standing)
                    notes[name][job.id] = answers[unplaced]
                    if queue.strict_fifo:
                        notes[name].update(
                            dict.fromkeys((j.id for j in jobs[at + 1 :]), behind(job))
                        )
                        break
                    continue
                use = result.placed[job.id] = found
                take(rooms.free, use)
                take(rooms.unheld, use)
            if short is None:
                answers.clear()
                result.admit.append(job.id)
                moved.add(name)
                used[name] = used[name] + job.demand
                shared_use = shared_use + shared_part(queue.quota, job.demand)
                held = held + job.demand
                total = total + job.demand
                total = reclaim(job, capacity, total, borrowers, result, rooms)
                continue
            later[name].append(job)  # may borrow idle capacity, after every VC's guaranteed
            later_kinds[name][job.shape] = job.demand
            if queue.strict_fifo:
                notes[name].update(dict.fromkeys((j.id for j in jobs[at + 1 :]), behind(job)))
                break
            if fresh and all(
                answers.get((name, kind)) or ("no node", kind) in answers for kind in kinds
            ):  # each shape of the VC is short of its guarantee or found no node: so is the rest
                rest = jobs[at + 1 :]
                if all(answers[name, kind] for kind in kinds):
                    later[name] += rest
                else:
                    later[name] += [j for j in rest if answers[name, j.shape]]
                    notes[name].update(
                        (j.id, answers["no node", j.shape])
                        for j in rest
                        if not answers[name, j.shape]
                    )
                later_kinds[name].update(
                    (k, j.demand) for k, j in kinds.items() if answers[name, k]
                )
                break
    for run in running:  # the borrowers preempted above no longer count against max capacity
        if run.id in result.preempt:
            borrowed[run.vc] = borrowed[run.vc] - run.demand
    answers.clear()
    demands = {k: d for kinds in later_kinds.values() for k, d in kinds.items()}.values()
    idle_node: dict[str, bool] = {}  # shape -> whether its tasks find a node with idle room
    done = False
    for name, jobs in later.items():
        queue = queue_of[name]
        most = ceiling(capacity, queue.max_capacity, guarantee(queue.quota, shared))
        kinds = later_kinds[name]
        for job in jobs:
            if max_admit is not None and len(result.admit) >= max_admit:
                done = True
                break
            if not answers and all(shortfall(d, capacity, total) for d in demands):
                done = True  # no idle room for any of them: none of the rest borrows
                break
            key = (name, job.shape)
            fresh = key not in answers
            if fresh:
                mine = used[name] + borrowed[name]
                for kind, demand in kinds.items():
                    answers[name, kind] = shortfall(demand, capacity, total) is None and (
                        shortfall(demand, most, mine) is None
                    )
            if answers[key]:
                found = None
                if rooms is not None:
                    unplaced = ("no idle node", job.shape)
                    if unplaced not in answers:
                        fresh = True
                        found = place(shapes(job), rooms.free)
                        if found is None:
                            answers[unplaced] = True  # until an admission moves the rooms
                            idle_node[job.shape] = False  # for the rest of the pass
                if rooms is None or found is not None:
                    if found is not None:
                        take(rooms.free, found)
                        rooms.where[job.id] = result.placed[job.id] = found
                    answers.clear()
                    result.admit.append(job.id)
                    moved.add(name)
                    result.borrow.add(job.id)
                    borrowed[name] = borrowed[name] + job.demand
                    total = total + job.demand
                    continue
            if fresh and all(
                (name, kind) in answers
                and (not answers[name, kind] or ("no idle node", kind) in answers)
                for kind in kinds
            ):  # none of the VC's shapes borrows: neither does the rest
                break
        if done:
            break
    result.left -= len(result.admit)
    if not standing:
        return result
    admitted = set(result.admit)
    free_rooms = rooms.free if rooms is not None else None
    for name, jobs in queued.items():
        queue = queue_of[name]
        guaranteed = Queue(
            name, guarantee(queue.quota, shared), queue.strict_fifo, queue.max_capacity
        )
        counted = charged(queue.quota, used[name], shared_use)
        mine = used[name] + borrowed[name]
        texts = {  # what a job of each shape lacks, once the pass is decided
            kind: lack(
                one,
                guaranteed,
                counted,
                capacity,
                (held, total),
                mine,
                placeable(one, free_rooms, idle_node),
            )
            for kind, one in kinds_of[name].items()
        }
        result.waiting.update(
            stand(jobs, admitted if name in moved else set(), notes[name], texts, told, name)
        )
    return result


def stand(
    jobs: list[Waiting],
    admitted: set[int],
    notes: dict[int, str],
    texts: dict[str, str],
    told: dict[str, Any] | None,
    vc: str,
) -> dict[int, tuple[str, int]]:
    """Where each of a VC's waiting jobs (``jobs``, in queue order, less ``admitted``) stands:
    its reason (its note, else its shape's text) and its position. ``told``: where the caller
    keeps each VC's answer from one pass to the next, given again while nothing it depends on
    moved: the same list of jobs (``fairness.ordered`` keeps it), none admitted, the same notes
    and texts (after a few jobs end, most of 100 VCs' 10,000 jobs stand where they stood, and
    working out each again was a quarter of a pass, ``bench/admission.py``)."""
    kept = told.get(vc) if told is not None else None
    if (
        kept is not None
        and kept[0] is jobs
        and not admitted
        and (kept[1], kept[2]) == (notes, texts)
    ):
        return kept[3]
    standing = {}
    position = 0
    for job in jobs:
        if job.id in admitted:
            continue
        position += 1
        ahead = JOBS_AHEAD[position] if position < 3 else f"{position - 1} jobs ahead"
        note = notes.get(job.id)
        if note is None:
            note = texts[job.shape]
        text = f"{note}, {ahead}"
        if job.preempted:
            text = f"preempted earlier; {text}"
        standing[job.id] = (text, position)
    if told is not None:
        told[vc] = (jobs, notes, texts, standing)
    return standing


def no_node(job: Waiting, free: dict[str, Resources], told: bool) -> str:
    """Why ``job`` found no node in ``free``, by node; worked out only for a pass that tells
    waiting jobs where they stand (it reads every node)."""
    return str(shortfall_by_node(shapes(job), free)) if told else ""


def placeable(job: Waiting, free: dict[str, Resources] | None, known: dict[str, bool]) -> bool:
    """Whether ``job``'s tasks find room on the nodes' ``free`` room (None: one node, whose room
    the totals say), kept per shape in ``known``."""
    if free is None:
        return True
    if job.shape not in known:
        known[job.shape] = place(shapes(job), free) is not None
    return known[job.shape]


def behind(head: Waiting) -> str:
    """Why a job waits behind the head of a strict-FIFO queue."""
    return f"behind {head.label or f'job {head.id}'} (strict FIFO)"


def lack(
    job: Waiting,
    queue: Queue,
    used: Resources,
    capacity: Limit,
    cluster_use: tuple[Resources, Resources],
    mine: Resources | None = None,
    on_a_node: bool = True,
) -> str:
    """Why ``job`` waits, once the pass is decided: what it lacks, and how much is free.

    ``queue.quota`` is the VC's guarantee and ``used`` what counts against it;
    ``cluster_use`` is (what guaranteed jobs hold, what all jobs use) over the whole cluster;
    ``mine`` what the VC's jobs hold, borrowed too (against its max capacity); ``on_a_node``:
    whether the job's tasks find nodes with the idle room (``placeable``).

    Beyond its guarantee a job is told whether there is idle room to borrow, not how much:
    that moves with every job that starts or ends anywhere, and saying it rewrote the reasons
    of thousands of waiting jobs in a pass that started five (``bench/admission.py``).
    """
    held, total = cluster_use
    short = shortfall(job.demand, queue.quota, used)
    if short is None:
        room = shortfall(job.demand, capacity, held)
        return f"waiting for {room}: {room.free} free in the cluster" if room else "waiting"
    text = f"waiting for {short} in '{queue.name}': {short.free} free"
    most = ceiling(capacity, queue.max_capacity, queue.quota)
    if queue.max_capacity < 100 and shortfall(job.demand, most, mine or used):
        return f"{text}, and '{queue.name}' may hold at most {queue.max_capacity:g}% of the cluster"
    if on_a_node and shortfall(job.demand, capacity, total) is None:
        return f"{text}, idle to borrow next pass"
    return f"{text}, not enough idle room to borrow"


def preemption_order(job: Running) -> tuple[int, float, int]:
    """Borrowers are preempted lowest priority first, then newest first."""
    return (job.priority, -job.created_at.timestamp(), -job.id)


def relieves(victim: Resources, used: Resources, limit: Limit) -> bool:
    """True when taking ``victim`` away lowers a resource that ``used`` has beyond ``limit``."""
    over = [
        (victim.cpu, used.cpu, limit.cpu),
        (victim.memory_mb, used.memory_mb, limit.memory_mb),
    ]
    if limit.gpus is not None:
        over.append((victim.gpu_total, used.gpu_total, sum(limit.gpus.values())))
        over += [
            (victim.gpus.get(kind, 0), count, limit.gpus.get(kind, 0))
            for kind, count in used.gpus.items()
            if kind != ANY_GPU
        ]
    return any(held > 0 and cap is not None and taken > cap for held, taken, cap in over)


def reclaim(
    job: Waiting,
    capacity: Limit,
    total: Resources,
    borrowers: list[Running],
    result: Plan,
    rooms: Rooms | None = None,
) -> Resources:
    """Preempt as few borrowers as it takes for the cluster (and, with ``rooms``, each node) to
    hold ``total``.

    In preemption order, take each borrower that holds some of what is missing (on the cluster
    or on a node that is overdrawn) until it fits; then spare, newest choice first, every one
    whose resources turn out not to be needed (Kueue's minimal preemption). ``borrowers`` loses
    the ones preempted; ``rooms`` gets their room back.
    """
    free = rooms.free if rooms is not None else {}
    where = rooms.where if rooms is not None else {}

    def over(total: Resources) -> bool:
        return exceeds(total, capacity) or any(overdrawn(room) for room in free.values())

    chosen: list[Running] = []
    for victim in list(borrowers):
        if not over(total):
            break
        on_nodes = where.get(victim.id, {})
        if relieves(victim.demand, total, capacity) or any(
            overdrawn(free[node]) for node in on_nodes if node in free
        ):
            chosen.append(victim)
            total = total - victim.demand
            give(free, on_nodes)
    for victim in reversed(chosen):
        take(free, where.get(victim.id, {}))
        if not over(total + victim.demand):
            chosen.remove(victim)
            total = total + victim.demand
        else:
            give(free, where.get(victim.id, {}))
    for victim in chosen:
        borrowers.remove(victim)
        result.preempt[victim.id] = (
            f"preempted: '{job.vc}' needed its quota back; waiting to run again"
        )
    return total


def shapes(job: Waiting) -> tuple[TaskShape, ...]:
    """A job's tasks; one task of its whole demand when they are not known."""
    return job.tasks or (("", 1, job.demand),)


class QuotaHolder(Protocol):
    """What a quota is read from (a ``clusters.models.VirtualCluster``)."""

    cpu: int | None
    memory_mb: int | None
    gpus: dict[str, int] | None


def quota_of(vc: QuotaHolder) -> Limit:
    return Limit(vc.cpu, vc.memory_mb, None if vc.gpus is None else dict(vc.gpus))
