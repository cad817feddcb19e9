"""What the local backend limits a task by on this host, and the reason that names the limit a
task ended on.

The kernel enforces each limit (``cgroups``: memory with swap, cpu, processes; ``disk``: the
working directory; bwrap: /tmp and /dev/shm; ``ulimit``: open files; the wrapper: the logs).
Here they are read back: ``HostLimits`` says what holds on this host (start-up output, admin
pages, job page; the backend refuses other users' tasks where one is missing), ``end_reason``
turns what the kernel counted and the task's last output into a reason a person can act on.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from backends.local import cgroups, disk
from backends.local.sandbox import SandboxConfig
from backends.local.taskdir import read_text, write_private

LIMITS = "limits.json"  # in the task's control directory: its limits, written at launch
EVENTS = "limit_events.json"  # what the kernel counted, kept once the task's cgroups are gone
KILLED = "killed"  # the task met its pids or memory limit: it is stopped whole
TAIL_BYTES = 16 * 1024  # of each log, read once when a task fails, for the limits' messages
NO_SPACE = "No space left on device"
TOO_MANY_FILES = "Too many open files"
LOG_CAPPED = "[portal] log capped at"


@dataclass(frozen=True)
class HostLimits:
    """Which limits hold for tasks on this host."""

    hierarchy: cgroups.Hierarchy
    disk: bool  # a task's working directory is a file system of its own size

    def unlimited(self, config: SandboxConfig) -> list[str]:
        """The limits a task would run without here (empty: every one holds)."""
        missing = list(self.hierarchy.missing)
        if config.disk_mb > 0 and not self.disk:
            missing.append("disk")
        return missing

    def describe(self, config: SandboxConfig) -> list[str]:
        lines = [self.hierarchy.describe()]
        if config.disk_mb <= 0:
            lines.append("disk: not limited (LOCAL_TASK_DISK_MB=0)")
        elif self.disk:
            lines.append(f"disk: {config.disk_mb} MB per task (working directory, /tmp)")
        else:
            lines.append(
                "disk: the working directory is NOT limited (needs root and loop devices); "
                f"/tmp holds {config.disk_mb} MB"  # noqa: S108 - the sandbox's /tmp
            )
        lines.append(f"open files: {config.nofile} per process")
        return lines


def host_limits(config: SandboxConfig) -> HostLimits:
    return HostLimits(cgroups.detect(config.cgroup_root), disk.available())


@dataclass(frozen=True)
class TaskLimits:
    memory_mb: int
    cpu: int
    pids: int
    disk_mb: int  # 0: the working directory is not limited
    nofile: int
    log_max_bytes: int

    def save(self, control: Path) -> None:
        write_private(control / LIMITS, json.dumps(asdict(self)))

    @classmethod
    def load(cls, control: Path) -> TaskLimits | None:
        try:
            return cls(**json.loads(read_text(control / LIMITS) or ""))
        except (ValueError, TypeError):
            return None


def killed(hierarchy: cgroups.Hierarchy, ref: str, control: Path) -> bool:
    """Whether the kernel refused the task a fork at its pids limit (a fork bomb, or a program
    run away: it would never end by itself) or killed one of its processes for its memory; a
    running task is then stopped whole, as cgroup v2 does for memory on its own."""
    if (control / KILLED).exists():
        return True
    ended = (control / "exit_code").exists()
    events = _events(hierarchy, ref, control) if ended else cgroups.events(hierarchy, ref)
    if not (events.pids_max or events.oom_kills):
        return False
    write_private(control / KILLED, "")
    return True


def end_reason(hierarchy: cgroups.Hierarchy, ref: str, control: Path, exit_text: str) -> str:
    """The reason a sandboxed task that failed gives: the limit it met, else ``exit_text``."""
    events = _events(hierarchy, ref, control)
    limits = TaskLimits.load(control)
    if limits is None:
        return exit_text
    if events.pids_max:
        return (
            f"hit its limit of {limits.pids} processes and threads (LOCAL_TASK_PIDS_MAX) and "
            f"was stopped whole; {_then(exit_text)}"
        )
    if events.oom_kills:
        return (
            f"OOMKilled: the task went over its memoryMB ({limits.memory_mb} MB) and the kernel "
            f"killed {events.oom_kills} of its processes; {_then(exit_text)}"
        )
    tails = [_tail(control / name) for name in ("stderr.log", "stdout.log")]
    if any(NO_SPACE in tail for tail in tails):
        where = (
            f"its disk limit of {limits.disk_mb} MB (LOCAL_TASK_DISK_MB)"
            if limits.disk_mb
            else "a disk"
        )
        return f"filled {where}: {NO_SPACE}; {_then(exit_text)}"
    if any(TOO_MANY_FILES in tail for tail in tails):
        return (
            f"hit its limit of {limits.nofile} open files per process (LOCAL_TASK_NOFILE): "
            f"{TOO_MANY_FILES}; {_then(exit_text)}"
        )
    capped = [
        name for name, tail in zip(("stderr", "stdout"), tails, strict=True) if LOG_CAPPED in tail
    ]
    if capped:
        return (
            f"wrote more than {limits.log_max_bytes} bytes on {' and '.join(capped)} "
            f"(LOCAL_TASK_LOG_MAX_BYTES): the rest was dropped; {_then(exit_text)}"
        )
    return exit_text


def _then(exit_text: str) -> str:
    """How the task ended, after the limit: "it exited with code 1", "it was killed by ..."."""
    return f"it was {exit_text}" if exit_text.startswith("killed") else f"it {exit_text}"


def _events(hierarchy: cgroups.Hierarchy, ref: str, control: Path) -> cgroups.Events:
    """The task's counts, read once from its cgroups (then removed) and kept on disk."""
    saved = read_text(control / EVENTS)
    if saved:
        try:
            return cgroups.Events(**json.loads(saved))
        except (ValueError, TypeError):
            return cgroups.Events()
    events = cgroups.events(hierarchy, ref)
    write_private(control / EVENTS, json.dumps(asdict(events)))
    cgroups.remove(hierarchy, ref)
    return events


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as f:
            f.seek(max(0, f.seek(0, 2) - TAIL_BYTES))
            return f.read().decode(errors="replace")
    except OSError:
        return ""
