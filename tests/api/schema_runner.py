"""Run an OpenAPI document against our API in-process with schemathesis (WSGI, same database
transaction as the test), with a bearer token; collect every failed check."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
)

CHECKS = (not_a_server_error, response_schema_conformance, content_type_conformance)


def run_schema(
    raw: dict[str, Any],
    token: str,
    wanted: Callable[[str, str], bool],
    max_examples: int = 10,
    checks: Iterable[Any] = CHECKS,
) -> tuple[list[str], list[str]]:
    """(operations run, failures as ``METHOD path: message``)."""
    app = get_wsgi_application()
    schema = schemathesis.openapi.from_dict(raw)
    schema.app = app
    ran: list[str] = []
    failures: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        method, path = operation.method.upper(), operation.path
        if not wanted(method, path):
            continue
        ran.append(f"{method} {path}")

        @settings(
            max_examples=max_examples,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy())
        def probe(case: Any) -> None:
            response = case.call(headers={"Authorization": f"Bearer {token}"})
            try:
                case.validate_response(response, checks=tuple(checks))
            except (AssertionError, FailureGroup) as exc:
                # Several failed checks come as a FailureGroup (a BaseExceptionGroup, so not
                # an ExceptionGroup); each one's title alone would hide which field broke.
                found = exc.exceptions if isinstance(exc, BaseExceptionGroup) else [exc]
                for one in found:
                    text = " ".join(str(getattr(one, "message", "") or one).split())
                    failures.append(f"{case.method} {case.formatted_path}: {text[:300]}")

        # As Django's test client does: keep the test's connection (and transaction) open.
        request_started.disconnect(close_old_connections)
        request_finished.disconnect(close_old_connections)
        try:
            probe()
        finally:
            request_started.connect(close_old_connections)
            request_finished.connect(close_old_connections)
    return ran, list(dict.fromkeys(failures))
