"""The job list's keyword search (``name__icontains``) has a trigram index on PostgreSQL."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="trigram indexes are PostgreSQL's")
def test_a_keyword_search_has_a_trigram_index_on_postgresql():
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'job_name_trgm'")
        (definition,) = cursor.fetchone()
    # The expression icontains compares, so that the planner can use it (bench/pages.py: a
    # keyword matching a few of 100,000 jobs, 51 ms without it).
    assert "gin (upper((name)::text) gin_trgm_ops)" in definition


def test_the_embedded_default_migrates_and_creates_no_index_it_cannot_use(tmp_path: Path):
    """SQLite, whatever database the tests run on: a fresh ``migrate`` as ``make run`` does."""
    database = tmp_path / "portal.sqlite3"
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{database}", "PORTAL_VAR_DIR": str(tmp_path)}
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--verbosity", "0"],
        cwd=ROOT,
        env=env,
        check=True,
    )
    with sqlite3.connect(database) as db:
        names = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
    assert "jobs_job" in names and "job_name_trgm" not in names
