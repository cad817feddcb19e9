"""schemathesis runs OpenPAI's contract (``openpai_contract.yaml``: the paths of OpenPAI's
REST server v2 we serve) against our API: no 5xx, and every response fits OpenPAI's shapes."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import Group, User

from accounts.api import users as users_api
from accounts.models import ApiToken
from clusters.models import Storage
from jobs.exitspec import explain
from jobs.models import Job, Task
from tests.api.helpers import job_with_tasks
from tests.api.schema_runner import run_schema

pytestmark = pytest.mark.django_db(transaction=False)

CONTRACT = Path(__file__).with_name("openpai_contract.yaml")
# Path parameters: an object the fixture made, and one that does not exist (404 bodies).
KNOWN = {
    "user": ["alice", "ghost"],
    "job": ["hello", "broken", "missing"],
    "attemptIndex": ["0", "7"],
    "group": ["team", "nogroup"],
    "vc": ["default", "novc"],
    "storage": ["shared", "nostorage"],
}


def contract() -> dict[str, Any]:
    raw: dict[str, Any] = yaml.safe_load(CONTRACT.read_text())
    return raw


def pinned(raw: dict[str, Any]) -> dict[str, Any]:
    """The contract with its path parameters drawn from ``KNOWN``: random names only find 404s."""
    raw = copy.deepcopy(raw)
    for name, values in KNOWN.items():
        raw["components"]["parameters"][name]["schema"] = {"type": "string", "enum": values}
    return raw


def reads_and_submissions(method: str, path: str) -> bool:
    return method == "GET" or (method, path) == ("POST", "/api/v2/jobs")


@pytest.fixture
def token(alice: User, admin: User) -> str:
    job_with_tasks(alice)
    broken = job_with_tasks(alice, "broken", ssh_port=None)
    Job.objects.filter(pk=broken.pk).update(state="FAILED", exit_code=1)
    Task.objects.filter(attempt__job=broken).update(
        state="FAILED",
        exit_code=1,
        exit_spec=explain(1).as_dict(),  # type: ignore[union-attr]
    )
    alice.groups.add(Group.objects.create(name="team"))
    Storage.objects.create(name="shared", kind=Storage.NFS, server="nfs1", path="/data")
    issued: str = ApiToken.objects.issue(admin, 3600)[1]  # type: ignore[attr-defined]
    return issued


def test_the_contract_lists_the_paths_we_serve() -> None:
    paths = contract()["paths"]
    for path in [
        "/api/v2/info",
        "/api/v2/authn/basic/login",
        "/api/v2/users/{user}",
        "/api/v2/virtual-clusters/{vc}",
        "/api/v2/jobs/{user}~{job}",
        "/api/v2/jobs/{user}~{job}/job-attempts/{attemptIndex}",
        "/api/v2/kubernetes/nodes",
    ]:
        assert path in paths
    assert not any(path.endswith("/ssh") for path in paths)


def test_openpai_contract_holds_for_reads_and_submissions(token: str) -> None:
    ran, failures = run_schema(pinned(contract()), token, reads_and_submissions, max_examples=8)
    assert len(ran) >= 18, ran
    assert failures == []


def test_the_runner_catches_a_missing_required_field(
    token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Drop ``storageConfig`` (required by OpenPAI's UserInfo) from our user bodies: caught."""
    real = users_api.user_info

    def without_storage_config(user: Any) -> dict[str, Any]:
        body = real(user)
        del body["storageConfig"]
        return body

    monkeypatch.setattr(users_api, "user_info", without_storage_config)
    ran, failures = run_schema(
        pinned(contract()),
        token,
        lambda method, path: (method, path) == ("GET", "/api/v2/users/{user}"),
        max_examples=5,
    )
    assert ran == ["GET /api/v2/users/{user}"]
    assert failures and all("storageConfig" in failure for failure in failures)
