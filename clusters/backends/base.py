"""The interface every execution backend implements.

Backends never touch the ORM: they take plain data in and give observations out. The lifecycle
(``jobs.lifecycle``) asks a backend to *place* the tasks of an attempt (addresses and ports, known
before anything starts, so that every task's environment can name its peers), renders each
task's bootstrap script with those placements, then *launches* each task and later *observes*
all live tasks in one call.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol


class TaskPhase(enum.StrEnum):
    """What a backend can say about one task it launched."""

    PENDING = "pending"  # accepted by the backend, not running yet (image pull, scheduling)
    RUNNING = "running"
    SUCCEEDED = "succeeded"  # exited with code 0
    FAILED = "failed"  # exited non-zero, was killed, or could not start
    GONE = "gone"  # the backend knows nothing of it (stopped and cleaned up, or lost)


@dataclass(frozen=True)
class TaskShape:
    """What one task asks for; the input to placement."""

    role: str
    index: int
    cpu: int
    memory_mb: int
    gpu: int
    port_counts: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Placement:
    """Where a task will be reachable: its address and its ports per label."""

    ip: str
    ports: dict[str, list[int]]


@dataclass(frozen=True)
class TaskLaunch:
    """Everything needed to start one task."""

    attempt_key: str  # unique per job attempt, safe in file names and labels: [a-z0-9-]
    role: str
    index: int
    retry: int  # 0 for the first run of the task in this attempt
    script: str  # the bootstrap script, run with /bin/sh
    env: dict[str, str]  # environment for the script (PAI_* and friends)
    placement: Placement
    cpu: int
    memory_mb: int
    gpu: int
    image: str = ""
    shm_mb: int = 64
    gpu_type: str = ""  # a GPU type the task must run on ("" = any); kubernetes: a node selector
    # Registry credentials for the image, ``{registry, username, password}`` (a ``dockerimage``
    # prerequisite's ``auth``); kubernetes turns them into an image pull secret.
    pull_secret: dict[str, str] | None = None


@dataclass(frozen=True)
class Observation:
    """One backend's view of one task at one moment."""

    ref: str
    phase: TaskPhase
    ip: str = ""
    node: str = ""
    exit_code: int | None = None
    diagnostics: str = ""
    started_at: datetime | None = None
    finished_at: datetime | None = None


@dataclass(frozen=True)
class ShellSpec:
    """How to open an interactive shell inside a running task: run ``argv`` under a pty."""

    argv: list[str]
    env: dict[str, str]
    cwd: str


@dataclass(frozen=True)
class Capacity:
    cpu: int
    memory_mb: int
    gpus: dict[str, int] = field(default_factory=dict)  # GPU type -> count


class Backend(Protocol):
    name: str

    def place(self, attempt_key: str, shapes: list[TaskShape]) -> list[Placement]:
        """Addresses and ports for each shape, in the same order."""
        ...

    def launch(self, task: TaskLaunch) -> str:
        """Start one task; return the backend's reference to it (stable across restarts)."""
        ...

    def observe(self, refs: list[str]) -> dict[str, Observation]:
        """The current observation of each ref, in one call; unknown refs are GONE."""
        ...

    def stop(self, refs: list[str]) -> None:
        """Ask every task to stop; it is stopped when ``observe`` no longer reports it running."""
        ...

    def read_log(self, ref: str, stream: str, tail_bytes: int | None = None) -> bytes:
        """The task's ``stdout`` or ``stderr``; the last ``tail_bytes`` when given."""
        ...

    def capacity(self) -> Capacity: ...

    def shell(self, ref: str) -> ShellSpec | None:
        """A shell in the task with its working directory and environment; None when the task
        is not running or this backend opens terminals another way."""
        ...
