"""Peers: where a backend learns the tasks' addresses only once they run (Slurm), each task
waiting in its barrier gets its environment again, rendered with every task's address and
ports, once every task of its attempt has published one (``backends.base.SupportsPeers``)."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from backends.base import Backend, Placement, SupportsPeers
from jobs.models import Job, JobAttempt, Task
from jobs.runtime import task_environment
from jobs.runtime.context import context_for
from jobs.runtime.env import JobContext, TaskKey, container_id
from jobs.states import LIVE_TASK_STATES

if TYPE_CHECKING:  # observe calls publish: a plain import would be a cycle
    from jobs.lifecycle.observe import TaskRow


def publish(backend: Backend, awaiting: list[TaskRow]) -> int:
    """Once every task of an attempt that has a task in ``awaiting`` has an address, hand each
    of its live tasks its environment with them all (four queries for any number); the number
    handed. Every live task, not only those of ``awaiting``: a wake-up pass observes only the
    tasks that just published, and a peer that published in an earlier one waits as well."""
    if not awaiting or not isinstance(backend, SupportsPeers):
        return 0
    attempt_ids = {task.attempt_id for task in awaiting}
    placements: dict[int, dict[TaskKey, Placement]] = defaultdict(dict)
    live: list[dict[str, Any]] = []
    for row in Task.objects.filter(attempt_id__in=attempt_ids).values(
        "attempt_id", "attempt__job_id", "role", "index", "address", "ports", "retries",
        "backend_ref", "state",
    ):  # fmt: skip
        placements[row["attempt_id"]][(row["role"], row["index"])] = Placement(
            row["address"], row["ports"]
        )
        if row["backend_ref"] and row["state"] in LIVE_TASK_STATES:
            live.append(row)
    keys = dict(JobAttempt.objects.filter(id__in=attempt_ids).values_list("id", "key"))
    jobs = Job.objects.select_related("owner", "virtual_cluster").in_bulk(
        {task.job_id for task in awaiting}
    )
    contexts: dict[int, JobContext] = {}
    handed = 0
    for task in live:
        known = placements[task["attempt_id"]]
        if any(not placement.ip for placement in known.values()):
            continue  # a peer has no address yet: its own publication brings the next pass
        job_id = task["attempt__job_id"]
        if job_id not in contexts:
            contexts[job_id] = context_for(jobs[job_id], backend.name)
        role, index = task["role"], task["index"]
        container = container_id(keys[task["attempt_id"]], role, index, task["retries"])
        env = task_environment(contexts[job_id], known, role, index, container)
        backend.publish_peers(task["backend_ref"], env)
        handed += 1
    return handed
