"""PostgreSQL prepares the statements a connection runs again and again, planned per call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from django.db import connection

from clusters.admission import chosen_or_default
from clusters.models import VirtualCluster
from portal.accounts.authentication import token_owner
from portal.accounts.models import ApiToken, hash_token

ROOT = Path(__file__).resolve().parents[2]


def options_with(**env: str) -> dict[str, object]:
    code = (
        "import django, json; django.setup(); from django.conf import settings;"
        "print(json.dumps(settings.DATABASES['default'].get('OPTIONS', {})))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings", **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(run.stdout)


def test_postgresql_binds_on_the_server_and_prepares_after_five_runs_unless_told_not_to():
    """Prepared statements are still planned for each call's values: a generic plan made
    the keyword search of the job list five times slower (bench/pages.py)."""
    url = "postgres://someone@db.example:5432/portal"
    assert options_with(DATABASE_URL=url) == {
        "server_side_binding": True,
        "prepare_threshold": 5,
        "options": "-c plan_cache_mode=force_custom_plan",
    }
    never = options_with(DATABASE_URL=url, DATABASE_PREPARE_AFTER="0")
    assert never == {"server_side_binding": True, "prepare_threshold": None}
    assert "server_side_binding" not in options_with(DATABASE_URL="sqlite:///x.sqlite3")


@pytest.mark.django_db
def test_a_statement_run_again_and_again_is_prepared_on_postgresql():
    if connection.vendor != "postgresql":
        assert connection.vendor == "sqlite"  # the embedded default has nothing to prepare
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements")
        before = cursor.fetchone()[0]
    for _ in range(6):
        list(VirtualCluster.objects.filter(name="prepared-or-not"))
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        statements = [row[0] for row in cursor.fetchall()]
    assert len(statements) > before
    with connection.cursor() as cursor:
        cursor.execute("SHOW plan_cache_mode")
        assert cursor.fetchone()[0] == "force_custom_plan"
    assert any("prepared-or-not" not in s and "clusters_virtualcluster" in s for s in statements)


@pytest.mark.django_db(transaction=True)
def test_prepared_lookups_still_run_after_a_migration_adds_a_column(alice):
    """A statement that selects ``*`` changes its result when another connection (a migration)
    adds a column, and PostgreSQL then refuses to run it prepared: every API call would fail
    until the web process reconnects. The written-out lookups name their columns."""
    if connection.vendor != "postgresql":
        assert connection.vendor == "sqlite"  # nothing is prepared there
        return
    _, token = ApiToken.objects.issue(alice, 3600)
    digest = hash_token(token)
    for _ in range(6):  # prepared from the sixth run on
        assert token_owner(digest)[0] == alice
        assert chosen_or_default(alice, None).name == "default"
    tables = ("auth_user", "clusters_virtualcluster")
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as migration:
        for name in tables:
            migration.execute(f"ALTER TABLE {name} ADD COLUMN added_later integer")
        try:
            assert token_owner(digest)[0] == alice
            assert chosen_or_default(alice, None).name == "default"
        finally:
            for name in tables:
                migration.execute(f"ALTER TABLE {name} DROP COLUMN added_later")
