"""What the running jobs hold, kept from one admission pass to the next: per VC, per VC and
user, and on each node, always equal to a fresh sum, counting only the jobs that changed."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from clusters.holdings import Holdings
from clusters.placement import rooms_of
from clusters.quota import Running
from clusters.resources import Resources

T0 = datetime(2024, 1, 1)


def gpus(n: int, cpu: int = 1) -> Resources:
    return Resources(cpu, 0, {"V100": n} if n else {})


def sums(holdings: Holdings) -> tuple[object, ...]:
    return holdings.own, holdings.lent, holdings.users


def test_what_is_kept_between_passes_equals_a_fresh_sum_and_counts_only_what_changed(
    monkeypatch,
):
    caps = {"n1": gpus(8, 16), "n2": gpus(8, 16), "n3": gpus(8, 16)}
    a = Running(1, "a", gpus(2), T0, user="u1", placed={"n1": gpus(2)})
    b = Running(
        2, "b", gpus(4), T0, borrowing=True, user="u1", placed={"n1": gpus(1), "n2": gpus(3)}
    )
    c = Running(3, "a", gpus(1), T0, user="u2", placed={"n3": gpus(1)})
    d = Running(4, "b", gpus(8), T0, user="u2", placed={"n1": gpus(8)})
    kept = Holdings()
    counted: list[int] = []
    count = Holdings.count
    monkeypatch.setattr(
        Holdings, "count", lambda self, job, sign: (counted.append(job.id), count(self, job, sign))
    )
    passes = [
        [a, b, c],
        [a, b, c],
        [a, replace(b, placed={"n3": gpus(4)}), c],
        [a, c],
        [c, replace(d, borrowing=True)],  # b's VC borrows again, as another user
        [c, d],
        [],
    ]
    each = []
    for running in passes:
        fresh = Holdings()
        fresh.update(running)
        counted.clear()
        kept.update(running)
        each.append(sorted(counted))
        assert sums(kept) == sums(fresh)
        assert rooms_of(caps, running, kept) == rooms_of(caps, running, fresh)
    # nothing moved: nothing counted again; b's tasks moved: out and in; b ended; a and c
    # ended, d came borrowing; d is guaranteed now (a new Running): out and in; d ended
    assert each == [[1, 2, 3], [], [2, 2], [2], [1, 4], [4, 4], [3, 4]]
    assert kept.own == kept.lent == kept.users == {}  # no sum left of a VC or user with no job
    smaller = {**caps, "n3": gpus(4, 16)}  # a node's capacity changed: its room with it
    kept.update(passes[2])
    fresh = Holdings()
    fresh.update(passes[2])
    assert rooms_of(smaller, passes[2], kept) == rooms_of(smaller, passes[2], fresh)


def test_the_sums_split_guaranteed_and_borrowed_per_vc_and_add_up_per_user():
    kept = Holdings()
    kept.update(
        [
            Running(1, "a", gpus(2), T0, user="u1"),
            Running(2, "a", gpus(3), T0, borrowing=True, user="u1"),
            Running(3, "a", gpus(1, cpu=4), T0, user="u2"),
            Running(4, "b", gpus(0, cpu=2), T0, borrowing=True, user="u1"),
        ]
    )
    assert kept.own == {"a": gpus(3, cpu=5)}
    assert kept.lent == {"a": gpus(3), "b": Resources(2)}
    assert kept.users == {
        "a": {"u1": gpus(5, cpu=2), "u2": gpus(1, cpu=4)},
        "b": {"u1": Resources(2)},
    }
