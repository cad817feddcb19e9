"""What changed among the live jobs and tasks since a pass last looked (PostgreSQL).

A trigger stamps each job and task row with the id of the transaction that inserted it or
changed what admission reads of it (``jobs/migrations/0015_change_feed.py``). Every transaction
a read could not see has an id at least the *horizon* taken before that read (the oldest one
still running, ``pg_snapshot_xmin``), so the rows stamped at or after it hold every change the
book has not seen: some seen already, never one missed. A row deleted leaves no stamp: every
statement that deletes rows counts itself (0016), and the count is read with the horizon; when
it moved, the book reads everything again (``jobs.lifecycle.book``). A stamp at or past the
snapshot's first unassigned id (but the reading transaction's own) cannot be of this database
(a dump restored into another cluster keeps its stamps) and is not news. Elsewhere (SQLite)
there is no feed and the book reads in full.

Raw SQL: the stamp is not a model field."""

from __future__ import annotations

from typing import Any

from django.db import connection

JOBS = """SELECT id, state, retries, virtual_cluster_id FROM jobs_job
WHERE changed >= %(since)s::text::xid8 AND (
    changed < pg_snapshot_xmax(pg_current_snapshot()) OR changed = pg_current_xact_id_if_assigned()
)"""
TASKS = """SELECT t.id, a.job_id, t.role, t.node, t.state
FROM jobs_task t JOIN jobs_jobattempt a ON a.id = t.attempt_id
WHERE t.changed >= %(since)s::text::xid8 AND (
    t.changed < pg_snapshot_xmax(pg_current_snapshot())
    OR t.changed = pg_current_xact_id_if_assigned()
)"""


Position = tuple[int, int]  # the horizon, and how many statements had deleted rows then


def position() -> Position | None:
    """Where the next read of the changes starts; None where there is no feed."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_snapshot_xmin(pg_current_snapshot())::text, count FROM jobs_deletions"
        )
        horizon, deletions = cursor.fetchone()
        return int(horizon), deletions


def jobs_since(since: int) -> list[tuple[Any, ...]]:
    """(id, state, retries, virtual cluster id) of every job changed at or after ``since``."""
    return changes(JOBS, since)


def tasks_since(since: int) -> list[tuple[Any, ...]]:
    """(id, job id, role, node, state) of every task changed at or after ``since``."""
    return changes(TASKS, since)


def changes(sql: str, since: int) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, {"since": str(since)})
        return cursor.fetchall()
