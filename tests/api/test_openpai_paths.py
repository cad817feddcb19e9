"""OpenPAI's path forms: every API route answers with or without a trailing slash and under
the ``/rest-server/`` prefix that OpenPAI's deployments (and its Python SDK) put before it."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.urls import URLPattern, URLResolver, get_resolver

from tests.api.helpers import client_for, job_with_tasks

pytestmark = pytest.mark.django_db

SAMPLE = {
    "username": "alice",
    "name": "hello",
    "attempt": "0",
    "stream": "stdout",
    "index": "0",
    "task_attempt": "0",
}


def api_routes(patterns: list, prefix: str = "") -> Iterator[str]:
    """Every route under /api/v1/ and /api/v2/, as written in the URLconf."""
    for entry in patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            yield from api_routes(entry.url_patterns, route)
        elif isinstance(entry, URLPattern) and route.startswith(("api/v1/", "api/v2/")):
            yield route


def concrete(route: str) -> str:
    """A path for the route: our job alice~hello for job parts, a sample word elsewhere."""
    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda m: SAMPLE.get(m[1], "sample"), route)


def api_paths() -> list[str]:
    return sorted({concrete(route) for route in api_routes(get_resolver().url_patterns)})


def test_every_api_path_answers_with_a_trailing_slash_and_under_rest_server(alice, admin):
    job_with_tasks(alice)
    client = client_for(admin)
    paths = api_paths()
    assert "/api/v2/users" in paths and "/api/v2/jobs/alice~hello/ssh" in paths
    for path in paths:
        canonical = client.get(path)
        assert canonical.status_code != 404 or canonical.json()["code"] != "NoApiError", path
        for variant in (path + "/", "/rest-server" + path, "/rest-server" + path + "/"):
            answer = client.get(variant)
            assert answer.status_code == canonical.status_code, variant
            assert answer.content == canonical.content or answer.status_code == 200, variant


def test_openpai_js_sdk_creates_a_user_with_a_trailing_slash(admin):
    new = {"username": "carol", "password": "carol-pw-123"}
    response = client_for(admin).post("/api/v2/users/", new, format="json")
    assert response.status_code == 201
    assert User.objects.filter(username="carol").exists()


def test_openpai_python_sdk_lists_jobs_under_rest_server(alice):
    job_with_tasks(alice)
    body = client_for(alice).get("/rest-server/api/v2/jobs?username=alice").json()
    assert [job["name"] for job in body] == ["hello"]


def test_a_path_outside_the_api_keeps_its_own_slash_rules(admin):
    assert client_for(admin).get("/api/schema/").status_code == 200
    assert client_for(None).get("/rest-server/jobs/").status_code == 404
