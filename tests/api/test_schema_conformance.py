"""schemathesis runs our published schema (``/api/schema/``) against the running API: no 5xx,
and every response matches the schema, for the GET endpoints and ``POST /api/v2/jobs``."""

from __future__ import annotations

import pytest
import yaml

from accounts.models import ApiToken
from tests.api.helpers import client_for, job_with_tasks
from tests.api.schema_runner import run_schema

pytestmark = pytest.mark.django_db(transaction=False)


@pytest.fixture
def token(alice, admin) -> str:
    job_with_tasks(alice)
    return ApiToken.objects.issue(admin, 3600)[1]


def our_schema() -> dict:
    response = client_for(None).get("/api/schema/")
    assert response.status_code == 200
    return yaml.safe_load(response.content)


def test_the_schema_describes_every_api_path(db):
    paths = our_schema()["paths"]
    for path in ["/api/v2/jobs", "/api/v2/jobs/{username}~{name}/ssh", "/api/v2/users"]:
        assert path in paths
    get_jobs = paths["/api/v2/jobs"]["get"]["responses"]["200"]
    assert get_jobs["content"]["application/json"]["schema"]


def test_our_schema_holds_for_reads_and_submissions(token):
    def wanted(method: str, path: str) -> bool:
        skip = path.endswith("/logout") or path.startswith("/api/schema")
        return not skip and (method == "GET" or (method, path) == ("POST", "/api/v2/jobs"))

    ran, failures = run_schema(our_schema(), token, wanted, max_examples=8)
    assert len(ran) > 20
    assert failures == []
