"""Admission proved by simulation (issue 27, item 6): a Hypothesis state machine drives random
virtual clusters, quotas, jobs, arrivals, ends, cancellations and node changes through the real
``clusters.quota.plan`` and checks, after every pass, the rules below. Each rule has a test that
switches it off in ``clusters.quota`` or ``clusters.placement`` and sees the machine fail.

The machine applies a plan as ``jobs.lifecycle.admit`` does: admitted jobs run (borrowing when
``plan.borrow`` says so), preempted jobs wait again (``preempted=True``, same submission time).
An admitted job's tasks are bound where the plan found room for them (``plan.placed``), or
with one node, on that node; a node lost ends the
jobs with tasks on it, a node that shrinks keeps what runs on it (over-committed).

"Amounts" are CPU, memory, GPUs of each type and GPUs in all; GPUs of no type ("") count in
all only (they may use any type). After a pass, with ``total`` what every running job holds,
``held`` what the guaranteed (non-borrowing) ones hold, ``free``/``unheld`` each node's
capacity less the tasks of every running / every guaranteed job:

(a) No over-commit. No amount of the cluster, of a node, or of what a VC's guaranteed jobs are
    charged against its guarantee (``clusters.quota.guarantee``: its quota, the shared rest for
    what it sets none of) goes beyond the larger of its capacity and what the jobs that ran
    before the pass, and still run, hold of it: a cluster that shrank may stay over-committed
    by what already ran, but the pass adds nothing to it. A VC that started a borrower holds
    no more than its max capacity (``ceiling``), again beyond what it held before.
(b) Guaranteed service. A waiting job (not preempted by this pass) that fits its VC's free
    guarantee and ``capacity - held`` and, with two or more nodes, finds room on ``unheld``
    (every borrower gone) does not wait, unless its VC is strict FIFO and a job ahead of it in
    the VC's queue (the order the pass started with) still waits or borrowed in this pass.
(c) Work conservation. A waiting job (same exceptions) does not fit at once the idle room
    ``capacity - total``, what its VC may still hold (``ceiling`` of its max capacity, less
    what its jobs hold, borrowed too) and, with nodes, ``free``.
(d) Fairness (DRF). Within a VC and a priority, a user's job ``x`` waits while another user's
    job ``y`` no smaller than it (every amount; with nodes, the same tasks) started in this pass
    only if ``x``'s user held, counting their jobs queued ahead of ``x``, a dominant share
    (largest fraction of the cluster's CPU, memory or GPUs) at least ``y``'s user's counting
    theirs ahead of ``y`` (equal: ``y`` submitted first). Why this holds of DRF: within a pass
    room only shrinks for the jobs behind, so a job passes one no larger than it only when it
    stands ahead in the queue, and the queue goes by that share. No user starves: another user
    passes them only while holding a share no larger, and each job started raises it.
(e) Reclaim. Only borrowers are preempted, only in a pass that starts a guaranteed job, and
    each was needed: putting it back (where its tasks were) would over-commit the cluster or a
    node. Checked where the pass starts one guaranteed job (a later reclaim in the same pass
    may free what made an earlier one necessary) and, without the borrowers started after the
    reclaim, nothing is over-committed (a cluster that shrank).

Passes with ``max_admit`` run until one admits fewer than it (the jobs told "fits; starts in
the next pass" start then); (a) and (e) hold after each, (b)-(d) after the last, which decides
as a pass without the cap.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)

from clusters import fairness, placement, quota
from clusters.fairness import queue_order
from clusters.holdings import Holdings
from clusters.limits import Limit, never_fits
from clusters.placement import Rooms, TaskShape, give, place
from clusters.quota import Plan, Queue, Running, Waiting, plan, shared_part, unguaranteed
from clusters.resources import ANY_GPU, Resources, sum_of
from tests.clusters.admission_rules import (
    After,
    adds_up,
    check_fairness,
    check_guaranteed_service,
    check_no_over_commit,
    check_reclaim,
    check_work_conservation,
    demand,
    vc_order,
)

T0 = datetime(2024, 1, 1)
KINDS = ("V100", "A100")
USERS = ("ann", "bob", "cyd")


# -- strategies -------------------------------------------------------------------------------

# One draw each (a shape from a list): drawing is most of the simulation's time.
NODE = st.sampled_from(
    [
        Resources(cpu, mem, {kind: n} if n else {})
        for n in (0, 1, 2, 4)
        for cpu in (1, 2, 4, 8)
        for mem in (1000, 2000, 4000, 8000)
        for kind in KINDS
    ]
)
TASK = st.sampled_from(
    [
        Resources(cpu, mem, {kind: n} if n else {})
        for n in (0, 1, 2)
        for cpu in (1, 2)
        for mem in (0, 500, 1000)
        for kind in (ANY_GPU, *KINDS)
        if n or kind == ANY_GPU
    ]
)
SHARE = st.sampled_from((None, 0, 25, 50))  # percent of the cluster; None: no quota set
QUOTA = st.tuples(SHARE, SHARE, SHARE)  # CPU, memory, GPUs of each type
SET = st.tuples(*[st.sampled_from((0, 25, 50))] * 3)


def quota_of(shares: tuple[int | None, ...], capacity: Limit) -> Limit:
    """A quota of ``shares`` (percent) of the cluster's CPU, memory and GPUs of each type."""

    def part(n: int | None, pct: int | None) -> int | None:
        return None if pct is None else (n or 0) * pct // 100

    cpu, memory, gpus = shares
    return Limit(
        part(capacity.cpu, cpu),
        part(capacity.memory_mb, memory),
        None if gpus is None else {k: n * gpus // 100 for k, n in (capacity.gpus or {}).items()},
    )


class Admission(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.nodes: dict[str, Resources] = {}
        self.queues: dict[str, Queue] = {"default": Queue("default", Limit())}
        self.running: dict[int, Running] = {}
        self.waiting: dict[int, Waiting] = {}
        self.tasks: dict[int, tuple[TaskShape, ...]] = {}
        self.count = 0  # ids and submission times (minutes)
        # kept from pass to pass as the book does: each VC's queue order, what the running jobs
        # hold, where each VC's jobs stand; every pass is checked against a plan without them
        self.orders: dict = {}
        self.holdings = Holdings()
        self.told: dict = {}

    def capacity(self) -> Limit:
        return Limit.of(sum_of(self.nodes.values()))

    def next_id(self) -> int:
        self.count += 1
        return self.count

    # -- the world changes ----------------------------------------------------------------

    @initialize(
        caps=st.lists(NODE, min_size=1, max_size=3),
        quotas=st.tuples(SET, SET),
    )
    def cluster(self, caps: list[Resources], quotas: tuple[tuple[int, ...], ...]) -> None:
        """Nodes, and two VCs that guarantee some of each resource (beyond it, they borrow;
        ``default`` has the rest)."""
        for cap in caps:
            self.nodes[f"n{self.next_id()}"] = cap
        for name, shares in zip("ab", quotas, strict=True):
            self.set_vc(name, shares, 100.0, False)

    @rule(
        name=st.sampled_from(("default", "a", "b")),
        shares=QUOTA,
        max_capacity=st.sampled_from((0.0, 50.0, 100.0, 100.0)),
        strict=st.booleans(),
    )
    def set_vc(
        self, name: str, shares: tuple[int | None, ...], max_capacity: float, strict: bool
    ) -> None:
        """Make or change a VC, unless the guarantees would add up to more than the cluster
        (the admin's edit is refused, issue 27 item 1)."""
        limit = quota_of(shares, self.capacity())
        others = [q.quota for n, q in self.queues.items() if n != name]
        if adds_up([*others, limit], self.capacity()):
            self.queues[name] = Queue(name, limit, strict, max_capacity)

    @rule(
        data=st.data(),
        users=st.lists(st.sampled_from(USERS), min_size=1, max_size=3),
        priority=st.sampled_from((0, 0, 10, -1)),
        roles=st.lists(st.tuples(st.integers(1, 2), TASK), min_size=1, max_size=2),
    )
    def submit(
        self,
        data: st.DataObject,
        users: list[str],
        priority: int,
        roles: list[tuple[int, Resources]],
    ) -> None:
        """The same job by each of ``users`` in turn, unless the cluster could never hold it
        (submit refuses it)."""
        vc = data.draw(st.sampled_from(sorted(self.queues)))
        shapes = tuple((f"r{i}", n, per) for i, (n, per) in enumerate(roles))
        need = demand(shapes)
        if never_fits(need, self.capacity()) or place(shapes, self.nodes) is None:
            return
        for user in users:
            i = self.next_id()
            self.tasks[i] = shapes
            self.waiting[i] = Waiting(
                i, vc, need, T0 + timedelta(minutes=i), priority, user=user, tasks=self.tasks[i]
            )

    @precondition(lambda self: self.running)
    @rule(data=st.data(), users=st.lists(st.sampled_from(USERS), min_size=1, max_size=3))
    def submit_alike(self, data: st.DataObject, users: list[str]) -> None:
        """A job like one running, to any VC: it needs the room that one holds (a borrower's
        room a guaranteed job wants back, users competing with identical jobs)."""
        like = self.running[data.draw(st.sampled_from(sorted(self.running)))]
        self.submit(data, users, like.priority, [(n, per) for _, n, per in self.tasks[like.id]])

    @precondition(lambda self: self.running or self.waiting)
    @rule(data=st.data())
    def end(self, data: st.DataObject) -> None:
        """A running job ends, or a waiting one is cancelled."""
        i = data.draw(st.sampled_from(sorted([*self.running, *self.waiting])))
        self.running.pop(i, None)
        self.waiting.pop(i, None)

    @rule(data=st.data(), change=st.sampled_from(("add", "lose", "resize")), cap=NODE)
    def change_node(self, data: st.DataObject, change: str, cap: Resources) -> None:
        """A node is added (four at most), lost (the jobs with tasks on it fail; one is
        left), or changes capacity (a GPU lost, memory added: what runs on it stays)."""
        if change == "add" and len(self.nodes) < 4:
            self.nodes[f"n{self.next_id()}"] = cap
            return
        node = data.draw(st.sampled_from(sorted(self.nodes)))
        if change == "resize":
            self.nodes[node] = cap
        elif len(self.nodes) > 1:
            del self.nodes[node]
            for job in list(self.running.values()):
                if node in job.placed:
                    del self.running[job.id]

    # -- a pass ---------------------------------------------------------------------------

    @precondition(lambda self: self.waiting)
    @rule(max_admit=st.sampled_from((None, None, None, 1, 2)))
    def admission_pass(self, max_admit: int | None) -> None:
        for _ in range(200):
            before, queued = dict(self.running), dict(self.waiting)
            decided = self.apply(self.decide(max_admit))
            after = self.after()
            check_no_over_commit(self, before, decided, after)
            check_reclaim(self, before, decided, after)
            if max_admit is None or len(decided.admit) < max_admit:
                check_fairness(self, before, queued, decided)
                owed = self.owed(before, queued, decided)
                check_guaranteed_service(self, owed, decided, after)
                check_work_conservation(self, owed, decided, after)
                return
        raise AssertionError("max_admit: the jobs told 'fits; starts in the next pass' never did")

    def decide(self, max_admit: int | None) -> Plan:
        """The plan, as the book makes it (with what it keeps from pass to pass), checked
        against one made without."""
        now = (
            list(self.queues.values()),
            self.capacity(),
            list(self.running.values()),
            list(self.waiting.values()),
        )
        decided = plan(
            *now,
            max_admit=max_admit,
            nodes=dict(self.nodes),
            orders=self.orders,
            holdings=self.holdings,
            told=self.told,
        )
        fresh = plan(*now, max_admit=max_admit, nodes=dict(self.nodes))
        assert decided == fresh, "what a pass keeps for the next changed what it decides"
        return decided

    def apply(self, decided: Plan) -> Plan:
        """As ``jobs.lifecycle.admit`` does: preempted jobs wait again, admitted ones run."""
        assert decided.borrow <= set(decided.admit), "plan: a borrower it did not admit"
        for i in decided.preempt:
            run = self.running.pop(i)
            self.waiting[i] = Waiting(
                i,
                run.vc,
                run.demand,
                run.created_at,
                run.priority,
                preempted=True,
                user=run.user,
                tasks=self.tasks[i],
            )
        for i in decided.admit:
            job = self.waiting.pop(i)
            use = decided.placed.get(i)
            if use is None and len(self.nodes) == 1:
                use = {next(iter(self.nodes)): job.demand}
            assert use is not None, f"(a) over-commit: job {i} started on no node"
            self.running[i] = Running(
                i,
                job.vc,
                job.demand,
                job.created_at,
                job.priority,
                borrowing=i in decided.borrow,
                user=job.user,
                placed=use,
            )
        return decided

    def free(self, jobs: Iterable[Running] | None = None) -> dict[str, Resources]:
        """Each node's capacity less the tasks of ``jobs`` (all running) on it."""
        room = dict(self.nodes)
        for job in self.running.values() if jobs is None else jobs:
            for node, part in job.placed.items():
                if node in room:
                    room[node] = room[node] - part
        return room

    def after(self) -> After:
        capacity = self.capacity()
        shared = unguaranteed((q.quota for q in self.queues.values()), capacity)
        used: dict[str, Resources] = defaultdict(Resources)
        borrowed: dict[str, Resources] = defaultdict(Resources)
        shared_use = Resources()
        guaranteed = [j for j in self.running.values() if not j.borrowing]
        for job in self.running.values():
            if job.borrowing:
                borrowed[job.vc] = borrowed[job.vc] + job.demand
                continue
            used[job.vc] = used[job.vc] + job.demand
            shared_use = shared_use + shared_part(self.queues[job.vc].quota, job.demand)
        return After(
            capacity,
            shared,
            sum_of(j.demand for j in self.running.values()),
            sum_of(j.demand for j in guaranteed),
            used,
            borrowed,
            shared_use,
            self.free(),
            self.free(guaranteed),
        )

    def fits_nodes(self, job: Waiting, room: dict[str, Resources]) -> bool:
        return len(self.nodes) < 2 or place(job.tasks, room) is not None

    def owed(
        self, before: dict[int, Running], queued: dict[int, Waiting], decided: Plan
    ) -> list[Waiting]:
        """The waiting jobs (b) and (c) apply to: not sent back by the pass, and not held back
        behind the head of a strict-FIFO queue (a job ahead of it when the pass began that
        still waits or borrowed in this pass)."""
        held_back: set[int] = set()
        for name, q in self.queues.items():
            if not q.strict_fifo:
                continue
            order = vc_order(name, before, queued, self.capacity())
            for n, job in enumerate(order):
                if job.id in self.waiting or job.id in decided.borrow:
                    held_back.update(j.id for j in order[n + 1 :])
                    break
        return [
            j
            for j in self.waiting.values()
            if j.id not in decided.preempt and j.id not in held_back
        ]


# -- the tests --------------------------------------------------------------------------------


def simulate(examples: int, shrink: bool = True) -> None:
    """Run the machine: derandomized (the same examples on every run, as CI's profile does),
    no example database; without ``shrink``, the first failing example is reported as found."""
    run_state_machine_as_test(
        Admission,
        settings=settings(
            max_examples=examples,
            stateful_step_count=40,
            deadline=None,
            database=None,
            derandomize=True,
            report_multiple_bugs=False,
            suppress_health_check=[HealthCheck.too_slow],  # a busy CI machine
            phases=tuple(Phase) if shrink else (Phase.explicit, Phase.generate),
        ),
    )


def test_admission_keeps_its_rules_in_every_pass() -> None:
    simulate(examples=200)


def preempt_all(
    job: Waiting,
    capacity: Limit,
    total: Resources,
    borrowers: list[Running],
    result: Plan,
    rooms: Rooms | None = None,
) -> Resources:
    """``reclaim`` that preempts every borrower."""
    for victim in list(borrowers):
        borrowers.remove(victim)
        result.preempt[victim.id] = "preempted"
        total = total - victim.demand
        if rooms is not None:
            give(rooms.free, rooms.where.get(victim.id, {}))
    return total


def overdrawn_by_any_entry(free: Resources) -> bool:
    """``placement.overdrawn`` before it was fixed: a node holding a task of GPUs of no type
    has a negative "" entry, and looked overdrawn (reclaim preempted its borrowers)."""
    return free.cpu < 0 or free.memory_mb < 0 or any(n < 0 for n in free.gpus.values())


def stale_stand(
    jobs: list[Waiting],
    admitted: set[int],
    notes: dict[int, str],
    texts: dict[str, str],
    told: dict | None,
    vc: str,
) -> dict[int, tuple[str, int]]:
    """``quota.stand`` that gives a queue's kept answer again whenever its jobs did not move,
    though what they lack did."""
    kept = told.get(vc) if told is not None else None
    if kept is not None and kept[0] is jobs and not admitted:
        return kept[3]
    return STAND(jobs, admitted, notes, texts, told, vc)


STAND = quota.stand
KEPT = "what a pass keeps for the next"  # decide's check

# rule switched off: (module, name, replacement, the invariants that catch it)
SWITCHED_OFF = {
    "reclaim preempts no one": (quota, "reclaim", lambda job, cap, total, *_: total, "(a)"),
    "reclaim preempts every borrower": (quota, "reclaim", preempt_all, "(e)"),
    "a node's any-type GPUs look overdrawn": (quota, "overdrawn", overdrawn_by_any_entry, "(e)"),
    "no fairness among users": (
        fairness,
        "fair_order",
        lambda jobs, held, capacity: sorted(jobs, key=queue_order),
        "(d)",
    ),
    "no borrowing": (quota, "ceiling", lambda *_: Limit(0, 0, {}), "(c)"),
    "no max capacity": (quota, "ceiling", lambda capacity, *_: capacity, "(a)"),
    "placement on nodes ignored": (placement, "fits", lambda need, free: True, "(a)"),
    "no guarantee checked": (quota, "guarantee", lambda q, shared: Limit(), "(a)"),
    "a queue told what it lacked before": (quota, "stand", stale_stand, KEPT),
    # a VC without a quota waits though within its share of the rest (b), or borrows no more
    # than max capacity of nothing allows (c)
    "no shared rest for VCs without a quota": (
        quota,
        "unguaranteed",
        lambda quotas, capacity: Limit(0, 0, {}),
        "(b)|(c)",
    ),
}


@pytest.mark.parametrize("switch", SWITCHED_OFF)
def test_the_simulation_fails_when_a_rule_is_switched_off(
    switch: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    module, name, replacement, caught_by = SWITCHED_OFF[switch]
    monkeypatch.setattr(module, name, replacement)
    tags = "|".join(re.escape(tag) for tag in caught_by.split("|"))
    # Up to 3,000 examples: it stops at the first failure, most often within 200, but some
    # seeds need nearly 1,000 to reach a rule that few states test (a node holding a task of
    # GPUs of no type while a borrower runs on it), and one CI run needed more.
    with pytest.raises(AssertionError, match=f"^({tags}) "):
        simulate(examples=3000, shrink=False)
