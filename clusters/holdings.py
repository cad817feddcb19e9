"""What the running jobs hold, kept from one admission pass to the next.

``clusters.quota.plan`` needs, besides its queues, what the running jobs hold: per virtual
cluster (VC) the guaranteed and the borrowed, per VC and user (fairness), and on each node with
the room that leaves (placement). With 4,000 jobs running that is 4,000 jobs summed into a few
hundred groups and 1,000 nodes' room on every pass, though a pass after a few jobs ended moves
a few of them. ``Holdings`` keeps the sums in the process that runs the passes
(``jobs.lifecycle.book``): each pass counts in and out only the ``Running`` objects that came,
went or changed (they are frozen, and the book makes a new one when a job's tasks move), and
works out again only the room of the nodes those were on.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from clusters.resources import Resources

if TYPE_CHECKING:  # quota's plan counts its running jobs here: their type for the annotations
    from clusters.quota import Running

Sums = dict[str, Resources]


class Holdings:
    def __init__(self) -> None:
        self.jobs: dict[int, Running] = {}
        self.own: Sums = {}  # VC -> what its guaranteed jobs hold
        self.lent: Sums = {}  # VC -> what its borrowing jobs hold
        self.users: dict[str, Sums] = {}  # VC -> user -> what the user's jobs in it hold
        self.total: Sums = {}  # node -> what every job's tasks hold there
        self.held: Sums = {}  # node -> what the guaranteed jobs' tasks hold there
        self.rooms: dict[str, tuple[Resources, Resources, Resources]] = {}  # cap, free, unheld
        self.counts: Counter[tuple[str, str, str]] = Counter()  # jobs in each sum but the nodes'

    def update(self, running: Iterable[Running]) -> None:
        """Hold what ``running`` holds, counting only the jobs that differ from the last."""
        now = {job.id: job for job in running}
        for job_id, job in self.jobs.items():
            if now.get(job_id) is not job:
                self.count(job, -1)
        for job_id, job in now.items():
            if self.jobs.get(job_id) is not job:
                self.count(job, 1)
        self.jobs = now

    def count(self, job: Running, sign: int) -> None:
        """Add ``job`` in (``sign`` 1) or take it out (-1); a sum no job is left in goes."""
        users = self.users.setdefault(job.vc, {})
        kind = "lent" if job.borrowing else "own"
        for sums, key, group in (
            (self.lent if job.borrowing else self.own, job.vc, (kind, job.vc, "")),
            (users, job.user, ("user", job.vc, job.user)),
        ):
            self.counts[group] += sign
            if self.counts[group]:
                sums[key] = add(sums.get(key), job.demand, sign)
            else:
                del self.counts[group], sums[key]
        if not users:
            del self.users[job.vc]
        for node, part in job.placed.items():
            self.rooms.pop(node, None)
            self.total[node] = add(self.total.get(node), part, sign)
            if not job.borrowing:
                self.held[node] = add(self.held.get(node), part, sign)

    def room(self, node: str, cap: Resources) -> tuple[Resources, Resources]:
        """The room ``node`` of capacity ``cap`` has: after every running job, after the
        guaranteed ones."""
        known = self.rooms.get(node)
        if known is None or known[0] is not cap:
            total, held = self.total.get(node), self.held.get(node)
            free = cap - total if total is not None else cap
            known = self.rooms[node] = (cap, free, cap - held if held is not None else cap)
        return known[1], known[2]


def add(was: Resources | None, part: Resources, sign: int) -> Resources:
    was = Resources() if was is None else was
    return was + part if sign > 0 else was - part
