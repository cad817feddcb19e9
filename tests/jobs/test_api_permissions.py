"""Who may do what with a job over HTTP: the owner, another user (bob), an admin, anonymous."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from clusters.models import VirtualCluster
from jobs import lifecycle
from jobs.models import Job
from tests.api.helpers import client_for
from tests.jobs.samples import hello_job

pytestmark = pytest.mark.django_db

JOB = "/api/v2/jobs/alice~hello"


@pytest.fixture
def research(alice) -> VirtualCluster:
    """A virtual cluster alice is a member of, and bob is not."""
    vc = VirtualCluster.objects.create(name="research")
    vc.members.add(alice)
    return vc


@pytest.fixture
def people(alice, bob, admin) -> dict[str | None, APIClient]:
    return {
        name: client_for(user)
        for name, user in [("alice", alice), ("bob", bob), ("admin", admin), (None, None)]
    }


def test_submitting_to_a_virtual_cluster_i_may_not_use_is_a_403_over_http(bob, research):
    response = client_for(bob).generic(
        "POST", "/api/v2/jobs?virtualCluster=research", hello_job(), content_type="text/yaml"
    )
    assert response.status_code == 403
    assert response.json()["code"] == "ForbiddenUserError"
    assert "research" in response.json()["message"]
    assert not Job.objects.exists()


@pytest.mark.parametrize("path", ["config", "events"])
@pytest.mark.parametrize(
    ("who", "code"), [("alice", 200), ("bob", 404), ("admin", 200), (None, 401)]
)
def test_only_the_owner_and_admins_read_a_jobs_config_and_events(alice, people, path, who, code):
    lifecycle.submit(alice, hello_job())
    assert people[who].get(f"{JOB}/{path}").status_code == code


@pytest.mark.parametrize(
    ("who", "code"), [("alice", 202), ("bob", 403), ("admin", 202), (None, 401)]
)
def test_only_the_owner_and_admins_stop_a_job(alice, people, who, code):
    lifecycle.submit(alice, hello_job())
    response = people[who].put(f"{JOB}/executionType", {"value": "STOP"}, format="json")
    assert response.status_code == code
    assert Job.objects.get().state == ("STOPPED" if code == 202 else "WAITING")


def listed(client: APIClient) -> set[str]:
    return {f"{j['username']}~{j['name']}" for j in client.get("/api/v2/jobs").json()}


def test_bob_does_not_list_jobs_of_a_virtual_cluster_he_is_not_a_member_of(
    alice, bob, people, research
):
    lifecycle.submit(alice, hello_job("secret-plan"), virtual_cluster="research")
    lifecycle.submit(alice, hello_job("open-plan"))  # in default, open to all
    lifecycle.submit(bob, hello_job("bobs"))
    assert listed(people["bob"]) == {"alice~open-plan", "bob~bobs"}
    assert listed(people["alice"]) == {"alice~secret-plan", "alice~open-plan", "bob~bobs"}
    assert listed(people["admin"]) == {"alice~secret-plan", "alice~open-plan", "bob~bobs"}
    assert people[None].get("/api/v2/jobs").status_code == 401


def test_the_api_documentation_page_answers_with_the_schema_link(alice):
    response = client_for(alice).get("/api/docs/")
    assert response.status_code == 200
    assert 'spec-url="/api/schema/"' in response.content.decode()
    assert client_for(alice).get("/api/schema/").status_code == 200
