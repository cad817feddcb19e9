"""Placement on nodes: a task's resources on one node, a job's tasks all at once (gang), the
reason naming the node shortfall, and reclaiming borrowers on the node a guaranteed job needs."""

from __future__ import annotations

from datetime import datetime, timedelta

from clusters import quota
from clusters.limits import Limit
from clusters.placement import place
from clusters.quota import Queue, Running, Waiting, plan
from clusters.resources import Resources

T0 = datetime(2024, 1, 1)


def gpus(n: int, cpu: int = 1) -> Resources:
    return Resources(cpu, 0, {"V100": n} if n else {})


def nodes(*caps: Resources) -> dict[str, Resources]:
    return {f"n{i + 1}": cap for i, cap in enumerate(caps)}


def total(caps: dict[str, Resources]) -> Limit:
    result = Resources()
    for cap in caps.values():
        result = result + cap
    return Limit.of(result)


def waiting(i: int, *tasks: tuple[str, int, Resources], vc: str = "a") -> Waiting:
    demand = Resources()
    for _, n, per in tasks:
        demand = demand + Resources(
            n * per.cpu, n * per.memory_mb, {k: n * c for k, c in per.gpus.items()}
        )
    return Waiting(i, vc, demand, T0 + timedelta(minutes=i), tasks=tuple(tasks))


def test_a_task_needs_its_gpus_on_one_node():
    four = nodes(gpus(2, 8), gpus(2, 8))
    assert place([("w", 1, gpus(4))], four) is None
    assert place([("w", 2, gpus(2))], four) == {"n1": gpus(2), "n2": gpus(2)}


def test_best_fit_keeps_a_whole_node_for_a_large_task():
    free = nodes(gpus(4, 8), gpus(1, 8))
    assert place([("small", 1, gpus(1)), ("big", 1, gpus(4))], free) == {
        "n1": gpus(4),
        "n2": gpus(1),
    }


def test_a_job_whose_task_fits_no_node_waits_naming_the_node_shortfall():
    caps = nodes(gpus(2, 8), gpus(2, 8))
    job = waiting(1, ("worker", 1, gpus(4)))
    result = plan([Queue("a", Limit())], total(caps), [], [job], nodes=caps)
    assert result.admit == []
    assert result.waiting[1] == (
        "waiting for a node with 4 GPU (V100) free for a task of 'worker': "
        "the most on one node is 2 (n1), no job ahead",
        1,
    )


def test_fragmented_free_room_is_said_by_node():
    caps = nodes(Resources(4), Resources(4))
    running = [
        Running(10, "a", Resources(2), T0, placed={"n1": Resources(2)}),
        Running(11, "a", Resources(2), T0, placed={"n2": Resources(2)}),
    ]
    job = waiting(1, ("w", 1, Resources(3)))
    result = plan([Queue("a", Limit())], total(caps), running, [job], nodes=caps)
    assert result.admit == []
    assert result.waiting[1][0].startswith(
        "waiting for a node with 3 CPU free for a task of 'w': the most on one node is 2"
    )


def test_a_gang_starts_only_when_every_task_fits_at_once():
    caps = nodes(Resources(4), Resources(4))
    running = [
        Running(10, "a", Resources(1), T0, placed={"n1": Resources(1)}),
        Running(11, "a", Resources(1), T0, placed={"n2": Resources(1)}),
    ]
    three = waiting(1, ("w", 3, Resources(2)))  # 6 CPUs of the 6 free, but 3 on each node
    two = waiting(2, ("w", 2, Resources(3)))
    result = plan([Queue("a", Limit())], total(caps), running, [three, two], nodes=caps)
    assert result.admit == [2]
    assert result.waiting[1][0].startswith(
        "waiting for a node with 2 CPU free for a task of 'w': the most on one node is 1 (n1)"
    )


def test_tasks_on_no_known_node_are_counted_where_they_would_go():
    caps = nodes(gpus(2, 8), gpus(2, 8))
    pending = Running(10, "a", gpus(2), T0, unplaced=(("w", 1, gpus(2)),))
    job = waiting(1, ("w", 2, gpus(2)))
    result = plan([Queue("a", Limit())], total(caps), [pending], [job], nodes=caps)
    assert result.admit == []


def test_a_guaranteed_job_preempts_only_the_borrower_on_the_node_it_needs():
    caps = nodes(gpus(4, 8), gpus(4, 8))
    on_n1 = Running(10, "b", gpus(2), T0, borrowing=True, placed={"n1": gpus(2)})
    on_n2 = Running(
        11, "b", gpus(2), T0 + timedelta(minutes=1), borrowing=True, placed={"n2": gpus(2)}
    )
    job = waiting(1, ("w", 1, gpus(4)))
    queues = [Queue("a", Limit(8, 0, {"V100": 8})), Queue("b", Limit(0, 0, {"V100": 0}))]
    # In total 4 GPUs are free: a plan by totals alone would start the job and preempt no one,
    # and the job would find no node.
    result = plan(queues, total(caps), [on_n1, on_n2], [job], nodes=caps)
    assert result.admit == [1]
    assert list(result.preempt) == [10]


def test_one_node_is_checked_by_its_totals_alone():
    caps = nodes(gpus(4, 8))
    result = plan(
        [Queue("a", Limit())], total(caps), [], [waiting(1, ("w", 2, gpus(2)))], nodes=caps
    )
    assert result.admit == [1]


def test_a_task_of_gpus_of_no_type_does_not_make_its_node_look_overdrawn():
    # n2's one V100 is held by a borrower's task asking for a GPU of any type: the node is
    # full, not overdrawn, and a 1-CPU guaranteed job that fits n1 preempts no one for it
    caps = nodes(Resources(1, 1000), Resources(1, 1000, {"V100": 1}))
    any_gpu = Resources(1, 0, {"": 1})
    borrower = Running(4, "default", any_gpu, T0, borrowing=True, placed={"n2": any_gpu})
    job = waiting(3, ("w", 1, Resources(1)))
    queues = [Queue("a", Limit()), Queue("default", Limit(0))]
    result = plan(queues, total(caps), [borrower], [job], nodes=caps)
    assert result.admit == [3]
    assert result.preempt == {}


def test_a_shape_that_fits_no_node_is_placed_once_per_pass(monkeypatch):
    """Thousands of waiting jobs of one shape on a fragmented cluster: each try reads every node,
    so what one job of a shape was told holds for the next until an admission moves the rooms
    (a pass at 10,000 jobs on 1,000 nodes took 9 s before)."""
    caps = nodes(*[gpus(2, 8) for _ in range(10)])
    jobs = [waiting(i, ("worker", 1, gpus(4))) for i in range(50)]
    jobs += [waiting(100 + i, ("worker", 1, gpus(4)), vc="b") for i in range(50)]
    tries = []

    def counted(tasks, free):
        tries.append(1)
        return place(tasks, free)

    monkeypatch.setattr(quota, "place", counted)
    queues = [Queue("a", Limit()), Queue("b", Limit(gpus={}))]  # b: every GPU borrowed
    result = plan(queues, total(caps), [], jobs, nodes=caps)
    assert result.admit == []
    assert len(tries) <= 3  # once on the free rooms and once without the borrowers; once to borrow
    assert result.waiting[49][0].startswith("waiting for a node with 4 GPU (V100) free")
    # b's jobs would borrow: 20 GPUs are idle, but no node has 4 of them
    assert result.waiting[149][0].startswith(
        "waiting for 4 GPU (V100) in 'b': 0 free, not enough idle room to borrow"
    )
