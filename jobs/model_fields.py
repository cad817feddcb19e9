from __future__ import annotations

import json
from typing import Any

from django.db import models


class OrderedJSONField(models.TextField):  # type: ignore[type-arg]
    """JSON kept as text, so that key order (task roles, port labels) survives PostgreSQL,
    whose jsonb sorts keys. Nothing queries inside these values."""

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> Any:
        return None if value is None else json.loads(value)

    def to_python(self, value: Any) -> Any:
        return json.loads(value) if isinstance(value, str) else value

    def get_prep_value(self, value: Any) -> str | None:
        return None if value is None else json.dumps(value)
