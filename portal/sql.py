"""Names for the statements written out by hand. Only ``clusters/admission.py`` uses them now (its
SQL is being replaced by another change; this module goes with it)."""

from __future__ import annotations

from functools import cache

from django.db import connection, models


@cache  # on the paths every request takes; the models and the database do not change
def table(model: type[models.Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


@cache
def columns(model: type[models.Model], alias: str) -> str:
    """Every column of ``model``, named: never ``*``, whose result changes when a migration adds
    a column, and PostgreSQL then refuses to run the statements it has prepared for it."""
    quote = connection.ops.quote_name
    return ", ".join(f"{alias}.{quote(f.column)}" for f in model._meta.concrete_fields)
