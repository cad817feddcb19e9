"""The job list's keyword search (``name__icontains``) has a trigram index on PostgreSQL."""

from __future__ import annotations

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db


@pytest.mark.skipif(connection.vendor != "postgresql", reason="trigram indexes are PostgreSQL's")
def test_a_keyword_search_has_a_trigram_index_on_postgresql():
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'job_name_trgm'")
        (definition,) = cursor.fetchone()
    # The expression icontains compares, so that the planner can use it (bench/pages.py: a
    # keyword matching a few of 100,000 jobs, 51 ms without it).
    assert "gin (upper((name)::text) gin_trgm_ops)" in definition


@pytest.mark.skipif(connection.vendor != "sqlite", reason="the embedded default's database")
def test_the_embedded_default_creates_no_index_it_cannot_use():
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE name = 'job_name_trgm'")
        assert cursor.fetchall() == []
