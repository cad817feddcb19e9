"""What an admission pass decides on, read from the database and kept between passes by the
process that runs them, so that a pass reads only what changed.

Each pass reads the jobs and tasks changed since the last one (``jobs.lifecycle.feed``; on a
database without the feed, every live job's *mark*: id, state, retries, virtual cluster, and
the live tasks' nodes); it reads in full (demand, submission time, owner, priority) only the
jobs that are new or whose mark moved, and when nothing moved since a pass that changed
nothing, it plans nothing (``jobs.lifecycle.admit``).
Nothing else about a job changes while it lives, so the book agrees with a fresh read
(``tests/clusters/test_admission_book.py`` checks it after every kind of transition). The
passes may move from one process to another: each process's book is checked against the
database, never against another process.

Measured reason (``bench/admission.py``, 10,000 waiting and 4,000 running jobs on 1,000 nodes,
this 2-core machine): reading every live job in full took 300-460 ms of a 550 ms pass, most of
it turning 14,000 timestamps and demands into Python objects; reading every mark and task then
took 40-60 ms, reading the changes a few."""

from __future__ import annotations

import functools
import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
from django.db import connection
from django.db.models import BooleanField, ExpressionWrapper, Q, TextField
from django.db.models.functions import Cast

from backends.base import Backend
from clusters import capacity
from clusters.demand import resources_of, shapes_of
from clusters.holdings import Holdings
from clusters.limits import Limit
from clusters.models import VirtualCluster
from clusters.placement import TaskShape, Use
from clusters.quota import Queue, Running, Waiting, quota_of
from clusters.resources import Resources
from jobs import wakeup
from jobs.lifecycle import feed
from jobs.models import Job, Task
from jobs.states import LIVE_JOB_STATES, LIVE_TASK_STATES, JobState

Mark = tuple[str, int, int]  # state, retries, virtual cluster id: what moves while a job lives
FULL_READ_BY_STATE = 1_000  # more changed jobs than this are read by state, not by id

# Read as text and decoded with orjson, and "has it started" instead of the time itself:
# Django's JSON and datetime converters were a third of reading every job.
READ_AS = {
    "resources_text": Cast("resources", TextField()),
    "preempted": ExpressionWrapper(Q(started_at__isnull=False), output_field=BooleanField()),
}
FIELDS = (
    "id",
    "state",
    "retries",
    "virtual_cluster_id",
    "resources_text",
    "created_at",
    "priority",
    "owner_id",
    "borrowing",
    "opportunistic",
    "preempted",
    "owner__username",
    "name",
    "reason",
    "queue_position",
)


@dataclass
class Loaded:
    """Everything a pass decides on, and each waiting job's current (reason, position) (with,
    at times, a few jobs no longer waiting)."""

    queues: list[Queue]
    capacity: Limit
    nodes: dict[str, Resources]
    running: list[Running]
    waiting: list[Waiting]
    standing: dict[int, tuple[str, int | None]]


@dataclass
class Book:
    marks: dict[int, Mark] = field(default_factory=dict)
    waiting: dict[int, Waiting] = field(default_factory=dict)
    running: dict[int, Running] = field(default_factory=dict)  # not placed on nodes
    roles: dict[int, dict[str, Resources]] = field(default_factory=dict)  # running jobs' tasks
    seen: tuple[Any, ...] = ()  # the queues and nodes last read, kept while they are the same
    capacity: Limit = field(default_factory=Limit)  # the nodes' sum
    tasks: dict[int, tuple[int, str, str]] = field(default_factory=dict)  # live: (job, role, node)
    by_job: dict[int, dict[int, tuple[str, str]]] = field(default_factory=dict)  # job -> its tasks
    retasked: set[int] = field(default_factory=set)  # jobs whose tasks moved since placed
    # where the next read of changed jobs (tasks) starts (``feed``); None: read them all
    since: feed.Position | None = None
    task_since: feed.Position | None = None
    # per running job, the job placed on nodes by its live tasks
    placed: dict[int, Running] = field(default_factory=dict)
    # a pass over what the book holds changed nothing and told every waiting job where it stands
    settled: bool = False
    # the last plan left jobs waiting: room freed during a pass is worth taking in before it
    # admits (``jobs.lifecycle.passes.take_in_more``)
    crowded: bool = False
    read_in_full: set[int] = field(default_factory=set)  # the jobs the last load read in full
    unread: set[int] = field(default_factory=set)  # in a VC made after the VCs were read
    # Where the waiting jobs stand as this book last wrote it, trusted while no other process
    # has written it since (``stamp``, ``jobs.wakeup.standing_stamp``); None: read it.
    standing: dict[int, tuple[str, int | None]] | None = None
    stamp: str = field(default_factory=lambda: uuid.uuid4().hex)
    orders: dict[str, Any] = field(default_factory=dict)  # each VC's queue order (``plan``)
    told: dict[str, Any] = field(default_factory=dict)  # where each VC's jobs stand (``plan``)
    holdings: Holdings = field(default_factory=Holdings)  # what running jobs hold (``plan``)

    def refresh(self, backend: Backend | None) -> bool:
        """Bring the book up to date in five queries (four with one node), reading only what
        changed since the last pass (``feed``) and in full only the jobs that are new or
        moved; whether anything a pass decides on moved."""
        vcs = list(VirtualCluster.objects.all())
        names = {vc.id: vc.name for vc in vcs}
        queues = [Queue(vc.name, quota_of(vc), vc.strict_fifo, vc.max_capacity) for vc in vcs]
        nodes = capacity.node_capacities(backend)
        now = feed.position()
        if now is None or self.since is None or now[1] != self.since[1] or now[0] < self.since[0]:
            self.since = self.task_since = None  # rows deleted (or another database): read all
        if connection.in_atomic_block:
            now = None  # what this read sees may yet be rolled back: the next reads everything
        live = Job.objects.filter(state__in=LIVE_JOB_STATES)
        moved, gone = self.moved_jobs(live, self.since)
        moved |= self.unread
        self.since = now
        for job_id in gone | moved:
            self.forget(job_id)
        self.read_in_full = self.read(live, moved, names)
        if len(nodes) > 1:
            tasks_moved = self.moved_tasks(self.task_since)
            self.task_since = now
        else:
            tasks_moved, self.task_since = bool(self.tasks), None
            if tasks_moved:  # one node: no task is placed by it
                self.tasks, self.by_job = {}, {}
                self.placed.clear()
        seen = (queues, names, nodes)
        moved_nodes = seen != self.seen
        if moved_nodes:  # their sum, and each running job's place on them, worked out again
            self.seen, self.capacity = seen, capacity.summed(nodes)
            self.placed.clear()
        changed = bool(moved or gone or tasks_moved or moved_nodes)
        self.settled = self.settled and not changed
        return changed

    def moved_jobs(self, live: Any, since: feed.Position | None) -> tuple[set[int], set[int]]:
        """The ``live`` jobs whose mark moved, and the jobs the book holds that are no longer
        live: from the rows changed ``since`` (``feed``), else from every live job's mark."""
        if since is not None:
            moved, gone = set(), set()
            for job_id, state, retries, vc_id in feed.jobs_since(since[0]):
                if state in LIVE_JOB_STATES:
                    if self.marks.get(job_id) != (state, retries, vc_id):
                        moved.add(job_id)
                elif job_id in self.marks:
                    gone.add(job_id)
            return moved, gone
        rows = live.values_list("id", "state", "retries", "virtual_cluster_id")
        marks = {job_id: (state, retries, vc_id) for job_id, state, retries, vc_id in rows}
        moved = {i for i, mark in marks.items() if self.marks.get(i) != mark}
        return moved, self.marks.keys() - marks.keys()

    def moved_tasks(self, since: feed.Position | None) -> bool:
        """Bring the live tasks' nodes up to date, as ``moved_jobs`` does the jobs; whether
        any moved."""
        if since is not None:
            moved = False
            for task_id, job_id, role, node, state in feed.tasks_since(since[0]):
                now = (job_id, role, node) if state in LIVE_TASK_STATES else None
                was = self.tasks.get(task_id)
                if now == was:
                    continue
                moved = True
                if was is not None:
                    del self.tasks[task_id]
                    self.untask(was[0], task_id)
                if now is not None:
                    self.tasks[task_id] = now
                    self.by_job.setdefault(job_id, {})[task_id] = (role, node)
                    self.retasked.add(job_id)
            return moved
        rows = Task.objects.filter(state__in=LIVE_TASK_STATES).values_list(
            "id", "attempt__job_id", "role", "node"
        )
        tasks = {task_id: (job_id, role, node) for task_id, job_id, role, node in rows}
        moved = tasks != self.tasks
        if moved:
            self.tasks, self.by_job = tasks, {}
            for task_id, (job_id, role, node) in tasks.items():
                self.by_job.setdefault(job_id, {})[task_id] = (role, node)
            self.placed.clear()
        return moved

    def untask(self, job_id: int, task_id: int) -> None:
        of_job = self.by_job[job_id]
        del of_job[task_id]
        if not of_job:
            del self.by_job[job_id]
        self.retasked.add(job_id)

    def loaded(self) -> Loaded:
        """What the book holds, as a pass decides on it, with each waiting job's current
        standing: what this book last wrote, else read (one query)."""
        queues, _, nodes = self.seen
        running = self.placed_running(nodes)
        if self.standing is None or wakeup.standing_stamp() != self.stamp:
            rows = Job.objects.filter(state=JobState.WAITING).values_list(
                "id", "reason", "queue_position"
            )
            self.standing = {job_id: (reason, position) for job_id, reason, position in rows}
        # as it is, not a copy of the waiting jobs' part: a pass only looks its jobs up in it
        waiting = list(self.waiting.values())
        return Loaded(queues, self.capacity, nodes, running, waiting, self.standing)

    def wrote(self, standing: dict[int, tuple[str, int]] | None) -> None:
        """A pass committed: it wrote ``standing`` (after ``stamp_standing``), or None when
        what it wrote is not known."""
        self.standing = None if standing is None else dict(standing)

    def placed_running(self, nodes: dict[str, Resources]) -> list[Running]:
        """The running jobs, each with what its live tasks hold on each node; worked out again
        only for a job whose tasks moved (or for all when the nodes changed: ``refresh``)."""
        running = []
        for i, job in self.running.items():
            known = self.placed.get(i)
            if known is None or i in self.retasked:
                rows = [(i, role, node) for role, node in self.by_job.get(i, {}).values()]
                placed, unplaced = task_places(rows, self.roles, nodes)
                if i in placed or i in unplaced:
                    job = replace(job, placed=placed[i], unplaced=unplaced.get(i, ()))
                known = self.placed[i] = job
            running.append(known)
        self.retasked.clear()
        return running

    def forget(self, job_id: int) -> None:
        self.marks.pop(job_id, None)
        self.waiting.pop(job_id, None)
        self.running.pop(job_id, None)
        self.roles.pop(job_id, None)
        self.placed.pop(job_id, None)
        if self.standing is not None:
            self.standing.pop(job_id, None)  # moved: what it was told may have been rewritten

    def read(self, live: Any, ids: set[int], names: dict[int, str]) -> set[int]:
        """Read the jobs ``ids`` in full into the book (as they are now: one that ended since
        its mark was read is left out); the ids read."""
        if not ids:
            return set()
        jobs = live if len(ids) > FULL_READ_BY_STATE else live.filter(id__in=ids)
        read = set()
        self.unread = set()
        for row in jobs.annotate(**READ_AS).values(*FIELDS):
            job_id = row["id"]
            if job_id not in ids:
                continue  # in the book already
            if row["virtual_cluster_id"] not in names:
                self.unread.add(job_id)  # in a VC made since the VCs were read: next pass
                continue
            read.add(job_id)
            self.marks[job_id] = (row["state"], row["retries"], row["virtual_cluster_id"])
            demand, tasks = parsed(row["resources_text"])
            vc = names[row["virtual_cluster_id"]]
            if row["state"] == JobState.WAITING:
                if self.standing is not None:
                    self.standing[job_id] = (row["reason"], row["queue_position"])
                self.waiting[job_id] = Waiting(
                    job_id,
                    vc,
                    demand,
                    row["created_at"],
                    row["priority"],
                    row["opportunistic"],
                    preempted=row["preempted"],
                    label=f"{row['owner__username']}~{row['name']}",
                    user=str(row["owner_id"]),
                    tasks=tasks,
                )
            else:
                self.running[job_id] = Running(
                    job_id,
                    vc,
                    demand,
                    row["created_at"],
                    row["priority"],
                    row["borrowing"],
                    user=str(row["owner_id"]),
                )
                self.roles[job_id] = {role: per for role, _, per in tasks}
        return read


BOOK = Book()  # this process's


@functools.lru_cache(maxsize=1024)
def parsed(text: str) -> tuple[Resources, tuple[TaskShape, ...]]:
    """A job's stored demand, read once per distinct text: thousands of waiting jobs come in a
    few shapes (the same objects are shared by the jobs of one shape; they are frozen)."""
    data = orjson.loads(text)
    return resources_of(data), shapes_of(data)


def task_places(
    tasks: Iterable[tuple[int, str, str]],
    roles: dict[int, dict[str, Resources]],
    nodes: dict[str, Resources],
) -> tuple[dict[int, Use], dict[int, tuple[TaskShape, ...]]]:
    """Where the live ``tasks`` (job, role, node) of the running jobs are (``roles``: what
    a task of each of their roles holds): per job, what they hold on each of ``nodes`` the
    backend placed them on, and the ones on none of them yet (a pending pod, a node not
    cached)."""
    placed: dict[int, Use] = defaultdict(dict)
    pending: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for job_id, role, node in tasks:
        if job_id not in roles:
            continue  # started after the running jobs were read: the next pass counts it
        per = roles[job_id].get(role, Resources())
        if node in nodes:
            on = placed[job_id]
            on[node] = on[node] + per if node in on else per
        else:
            pending[job_id][role] += 1
    unplaced = {
        job: tuple((role, n, roles[job].get(role, Resources())) for role, n in counts.items())
        for job, counts in pending.items()
    }
    return placed, unplaced
