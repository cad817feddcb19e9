"""The completion policy of an attempt, as a pure function of its tasks' states.

OpenPAI's rules (FrameworkLauncher's ApplicationCompletionPolicy): per task role, the attempt
fails once ``minFailedInstances`` tasks have failed for good, and succeeds once
``minSucceededInstances`` have succeeded (-1 turns either rule off); when every task has
finished and neither rule fired, it succeeds. v1's ``killAllOnCompletedTaskNumber`` ends the
attempt once that many tasks have finished.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from jobs.states import TaskState

FINISHED = (TaskState.SUCCEEDED, TaskState.FAILED, TaskState.STOPPED)


@dataclass(frozen=True)
class TaskView:
    role: str
    index: int
    state: str
    exit_code: int | None = None
    diagnostics: str = ""


@dataclass(frozen=True)
class Verdict:
    state: str  # TaskState.SUCCEEDED / FAILED as the attempt's outcome
    reason: str
    exit_code: int | None = None


def describe(task: TaskView) -> str:
    text = f"{task.role}-{task.index}"
    if task.exit_code is not None:
        text += f" exited with code {task.exit_code}"
    if task.diagnostics:
        text += f" ({task.diagnostics})"
    return text


def decide(protocol: dict[str, Any], tasks: Iterable[TaskView]) -> Verdict | None:
    """The attempt's outcome, or None while it goes on. FAILED tasks here have no retries left."""
    by_role: dict[str, list[TaskView]] = {}
    for task in tasks:
        by_role.setdefault(task.role, []).append(task)
    roles: dict[str, Any] = protocol["taskRoles"]
    for role, spec in roles.items():
        failed = [t for t in by_role.get(role, []) if t.state == TaskState.FAILED]
        min_failed = spec["completion"]["minFailedInstances"]
        if min_failed != -1 and len(failed) >= min_failed:
            first = min(failed, key=lambda t: t.index)
            return Verdict(
                TaskState.FAILED,
                f"task role '{role}': {len(failed)} of {spec['instances']} tasks failed "
                f"(minFailedInstances {min_failed}); {describe(first)}",
                first.exit_code,
            )
    for role, spec in roles.items():
        succeeded = [t for t in by_role.get(role, []) if t.state == TaskState.SUCCEEDED]
        min_succeeded = spec["completion"]["minSucceededInstances"]
        if min_succeeded != -1 and len(succeeded) >= min_succeeded:
            return Verdict(
                TaskState.SUCCEEDED,
                f"task role '{role}': {len(succeeded)} of {spec['instances']} tasks succeeded "
                f"(minSucceededInstances {min_succeeded})",
                0,
            )
    every = [t for group in by_role.values() for t in group]
    finished = [t for t in every if t.state in FINISHED]
    kill_all = (protocol.get("extras", {}).get("v1") or {}).get("killAllOnCompletedTaskNumber")
    if isinstance(kill_all, int) and kill_all > 0 and len(finished) >= kill_all:
        return Verdict(
            TaskState.SUCCEEDED,
            f"{len(finished)} tasks completed (killAllOnCompletedTaskNumber {kill_all})",
            0,
        )
    if every and len(finished) == len(every):
        return Verdict(TaskState.SUCCEEDED, "every task completed", 0)
    return None
