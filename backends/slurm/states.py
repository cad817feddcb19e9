"""Slurm's job states and reasons in the portal's words.

A waiting job's reason (squeue's ``%r``) is said in words for the job page (``Resources`` ->
"waiting for free nodes in its partition"); a job that ended without its task recording an exit
code gets diagnostics in the words the exit spec (``jobs/exit-spec.yaml``) matches: Slurm's
``OUT_OF_MEMORY`` says "out of memory" (OpenPAI's OOM exit), ``NODE_FAIL`` starts "NodeLost",
``PREEMPTED`` starts "Preempting". Slurm's own name stays in brackets, so that an admin can
look it up.
"""

from __future__ import annotations

import re

WAITING_STATES = frozenset({"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "SUSPENDED"})
LIVE_STATES = WAITING_STATES | {"RUNNING", "COMPLETING", "RESIZING", "SIGNALING", "STAGE_OUT"}

# The reasons users meet most (``man squeue``, JOB REASON CODES), in words.
REASONS = {
    "None": "queued by Slurm",
    "Resources": "waiting for free resources in its partition",
    "Priority": "waiting behind jobs of higher priority in its partition",
    "Dependency": "waiting for the jobs it depends on",
    "BeginTime": "waiting for its start time",
    "JobHeldUser": "held by its user",
    "JobHeldAdmin": "held by an admin of the Slurm cluster",
    "ReqNodeNotAvail": "a node it needs is not available (down, drained or reserved)",
    "PartitionDown": "its partition is down",
    "PartitionInactive": "its partition is inactive",
    "PartitionNodeLimit": "it asks for more nodes than its partition allows",
    "PartitionTimeLimit": "it asks for more time than its partition allows",
    "Reservation": "waiting for its advanced reservation",
    "Licenses": "waiting for a license",
    "NodeDown": "a node it needs is down",
    "BadConstraints": "no node has the features it asks for",
    "Cleaning": "waiting while Slurm cleans up after its last run",
}
LOST = "the task's Slurm step ended before the task recorded an exit code (its wrapper was killed)"
OOM_KILLED = (
    "out of memory: the kernel killed it at its Slurm memory limit (an OOM kill in its cgroup)"
)
LIMIT = re.compile(r"^(QOS|Assoc)(Grp|Max)(\w+?)(Per(?:User|Account|Job|Node))?(?:Limit)?$")
ENDED = {
    "OUT_OF_MEMORY": "out of memory: Slurm killed the task at its memory limit (OUT_OF_MEMORY)",
    "TIMEOUT": "the job reached its time limit in Slurm and was killed (TIMEOUT)",
    "NODE_FAIL": "NodeLost: a node of the job failed in Slurm (NODE_FAIL)",
    "BOOT_FAIL": "NodeLost: a node of the job failed to boot in Slurm (BOOT_FAIL)",
    "PREEMPTED": "Preempting: Slurm preempted the job for another (PREEMPTED)",
    "CANCELLED": "cancelled in Slurm (CANCELLED)",
    "DEADLINE": "the job missed its deadline in Slurm (DEADLINE)",
    "FAILED": "the Slurm job failed before the task recorded an exit code (FAILED)",
    "COMPLETED": "the Slurm job ended before the task recorded an exit code (COMPLETED)",
}


def waiting_reason(reason: str) -> str:
    """Why Slurm holds a job, in words, with Slurm's own reason in brackets."""
    words = REASONS.get(reason)
    if words is None:
        limit = LIMIT.match(reason)
        if limit:
            source, kind, what, per = limit.groups()
            owner = "its QOS" if source == "QOS" else "its account"
            scope = f" {_split(per).lower()}" if per else ""
            group = "group " if kind == "Grp" else ""
            words = f"waiting: {owner}'s {group}{_split(what).lower()} limit{scope} is reached"
        else:
            words = _split(reason).lower() or "queued by Slurm"
    return f"Slurm: {words} ({reason})" if reason and reason != "None" else f"Slurm: {words}"


def ended_without_exit(state: str, reason: str) -> str:
    """Diagnostics for a task whose Slurm job ended before the task wrote its exit code."""
    words = ENDED.get(state, f"the Slurm job ended ({state})")
    if reason and reason not in ("None", state):
        words += f"; Slurm's reason: {reason}"
    return words


def _split(camel: str) -> str:
    """``QOSMaxCpuPerUser`` -> ``QOS Max Cpu Per User``."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", camel)
