"""Peers: where a backend learns the tasks' addresses only once they run (Slurm), each task
waiting in its barrier gets its environment again, rendered with every task's address and
ports, once every task of its attempt has published one (``backends.base.SupportsPeers``)."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from backends.base import Backend, Placement, SupportsPeers
from jobs.models import Job, JobAttempt, Task
from jobs.runtime import task_environment
from jobs.runtime.context import context_for
from jobs.runtime.env import JobContext, TaskKey, container_id

if TYPE_CHECKING:  # observe calls publish: a plain import would be a cycle
    from jobs.lifecycle.observe import TaskRow


def publish(backend: Backend, awaiting: list[TaskRow]) -> int:
    """Hand each task of ``awaiting`` whose attempt's tasks all have an address its
    environment with them all (four queries for any number); the number handed."""
    if not awaiting or not isinstance(backend, SupportsPeers):
        return 0
    attempt_ids = {task.attempt_id for task in awaiting}
    placements: dict[int, dict[TaskKey, Placement]] = defaultdict(dict)
    for row in Task.objects.filter(attempt_id__in=attempt_ids).values(
        "attempt_id", "role", "index", "address", "ports"
    ):
        placements[row["attempt_id"]][(row["role"], row["index"])] = Placement(
            row["address"], row["ports"]
        )
    keys = dict(JobAttempt.objects.filter(id__in=attempt_ids).values_list("id", "key"))
    jobs = Job.objects.select_related("owner", "virtual_cluster").in_bulk(
        {task.job_id for task in awaiting}
    )
    contexts: dict[int, JobContext] = {}
    handed = 0
    for task in awaiting:
        known = placements[task.attempt_id]
        if any(not placement.ip for placement in known.values()):
            continue  # a peer has no address yet: its own publication brings the next pass
        if task.job_id not in contexts:
            contexts[task.job_id] = context_for(jobs[task.job_id], backend.name)
        container = container_id(keys[task.attempt_id], task.role, task.index, task.retries)
        env = task_environment(contexts[task.job_id], known, task.role, task.index, container)
        backend.publish_peers(task.backend_ref, env)
        handed += 1
    return handed
