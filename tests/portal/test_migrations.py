"""The squashed migrations (issue 17) build what the models say and what the old files built;
a database migrated with the old files has nothing left to do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db.migrations.loader import MigrationLoader

ROOT = Path(__file__).resolve().parents[2]
SQUASHED = {
    ("accounts", "0001_squashed_0002_token_prefix"),
    ("clusters", "0001_squashed_0004_virtual_cluster_stopped"),
    ("jobs", "0001_squashed_0008_task_backend_ref"),
}
# Applies every migration with the old files (the squashes left out), then counts what a
# ``migrate`` with the squashes in place would still apply.
OLD_FILES_THEN_SQUASHED = """
import django
django.setup()
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
old = MigrationExecutor(connection)
old.loader = MigrationLoader(connection, replace_migrations=False)
old.migrate([node for node in old.loader.graph.leaf_nodes() if node not in %r])
new = MigrationExecutor(connection)
print(len(new.migration_plan(new.loader.graph.leaf_nodes())))
"""


@pytest.mark.django_db
def test_the_models_need_no_migration_beyond_the_squashed_ones():
    """``makemigrations --check`` exits 1 when a model changed with no migration for it."""
    call_command("makemigrations", check=True, dry_run=True, verbosity=0)


def test_a_fresh_database_gets_the_same_models_from_the_squashes_as_from_the_old_files():
    squashed = MigrationLoader(None, ignore_no_migrations=True)
    old = MigrationLoader(None, ignore_no_migrations=True, replace_migrations=False)
    old_ends = [node for node in old.graph.leaf_nodes() if node not in SQUASHED]
    assert set(squashed.graph.nodes) >= SQUASHED
    assert squashed.project_state() == old.project_state(old_ends)


def test_a_database_migrated_with_the_old_files_has_nothing_left_to_apply(tmp_path: Path):
    database = tmp_path / "portal.sqlite3"
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{database}", "PORTAL_VAR_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", OLD_FILES_THEN_SQUASHED % (SQUASHED,)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "0"
