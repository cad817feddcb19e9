"""What one reconcile pass did, filled in by each of its steps."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class PassReport:
    admitted: int = 0
    launched: int = 0
    changed_tasks: int = 0
    finished_jobs: int = 0
    skipped: bool = False
    touched_jobs: set[int] = field(default_factory=set)
    started_jobs: set[int] = field(default_factory=set)  # waiting jobs this pass started
    ended_jobs: set[int] = field(default_factory=set)  # jobs a task of which ended this pass
    touched_queues: set[str] = field(default_factory=set)  # VCs whose waiting jobs moved
    claimed: dict[str, str] = field(default_factory=dict)  # tasks changed, claimed mid-pass
