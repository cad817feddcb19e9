"""What changed among the live jobs and tasks since a pass last looked (PostgreSQL).

A trigger stamps each job and task row with the id of the transaction that inserted it or
changed what admission reads of it (``jobs/migrations/0015_change_feed.py``). Every transaction
a read could not see has an id at least the *horizon* taken before that read (the oldest one
still running, ``pg_snapshot_xmin``), so the rows stamped at or after it hold every change the
book has not seen: some seen already, never one missed. With the rows comes how many jobs (or
tasks) are live, in the same snapshot: a row deleted leaves no stamp, and a book whose count
differs reads everything again. Elsewhere (SQLite) there is no feed and the book reads in full.

Raw SQL: the stamp is not a model field, and the count must come from the same snapshot as the
rows, one statement.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection

from jobs.states import LIVE_JOB_STATES, LIVE_TASK_STATES

JOBS = """
WITH live AS (SELECT count(*) AS n FROM jobs_job WHERE state = ANY(%s))
SELECT live.n, j.id, j.state, j.retries, j.virtual_cluster_id
FROM live LEFT JOIN jobs_job j ON j.changed >= %s::text::xid8
"""

TASKS = """
WITH live AS (SELECT count(*) AS n FROM jobs_task WHERE state = ANY(%s))
SELECT live.n, t.id, a.job_id, t.role, t.node, t.state
FROM live LEFT JOIN (jobs_task t JOIN jobs_jobattempt a ON a.id = t.attempt_id)
    ON t.changed >= %s::text::xid8
"""


@dataclass
class Changes:
    rows: list[tuple]  # type: ignore[type-arg]  # the changed rows, without the count
    live: int  # how many rows are live now


def horizon() -> int | None:
    """Where the next read of the changes starts; None where there is no feed."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_snapshot_xmin(pg_current_snapshot())::text")
        return int(cursor.fetchone()[0])


def jobs_since(since: int) -> Changes:
    """(id, state, retries, virtual cluster id) of every job changed at or after ``since``."""
    return changes(JOBS, list(LIVE_JOB_STATES), since)


def tasks_since(since: int) -> Changes:
    """(id, job id, role, node, state) of every task changed at or after ``since``."""
    return changes(TASKS, list(LIVE_TASK_STATES), since)


def changes(sql: str, live_states: list[str], since: int) -> Changes:
    with connection.cursor() as cursor:
        cursor.execute(sql, [live_states, str(since)])
        rows = cursor.fetchall()
    return Changes([row[1:] for row in rows if row[1] is not None], rows[0][0])
