"""A migration step of raw SQL that runs on PostgreSQL only (a table setting, triggers; other
databases go without what it adds). Django's loader skips this module: its name starts with _."""

from functools import partial
from typing import Any

from django.db import migrations


def postgresql_only(forward: str, backward: str) -> migrations.RunPython:
    return migrations.RunPython(partial(execute, forward), partial(execute, backward))


def execute(sql: str, apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(sql)
