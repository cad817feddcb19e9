"""The job endpoints beyond submit: list, config, Stop, attempts, events."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from jobs import lifecycle
from jobs.models import Job
from jobs.states import JobState
from tests.jobs.helpers import settle
from tests.jobs.samples import hello_job

pytestmark = pytest.mark.django_db


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def jobs(alice, bob):
    made = [lifecycle.submit(alice, hello_job(f"a{i}")) for i in range(3)]
    made.append(lifecycle.submit(bob, hello_job("b0", secrets="{pw: topsecret}")))
    return made


def names(response) -> list[str]:
    body = response.json()
    return [job["name"] for job in (body["data"] if isinstance(body, dict) else body)]


def test_the_list_is_newest_first_with_openpai_fields(alice, jobs):
    response = client_for(alice).get("/api/v2/jobs")
    assert response.status_code == 200
    assert names(response) == ["b0", "a2", "a1", "a0"]
    first = response.json()[0]
    assert {"name", "username", "state", "virtualCluster", "totalGpuNumber", "retries"} <= set(
        first
    )


def test_the_default_order_is_by_submission_through_the_id_index(alice, jobs):
    from datetime import timedelta

    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    # A clock that went back: a0's time says newest, but it was submitted first.
    Job.objects.filter(name="a0").update(created_at=timezone.now() + timedelta(days=1))
    client = client_for(alice)
    with CaptureQueriesContext(connection) as queries:
        assert names(client.get("/api/v2/jobs")) == ["b0", "a2", "a1", "a0"]
    listing = next(q["sql"] for q in queries if 'FROM "jobs_job"' in q["sql"])
    # the list's own ORDER BY, the last one (debugId's subquery orders the attempts)
    assert listing.rsplit("ORDER BY", 1)[1].split("LIMIT")[0].strip() == '"jobs_job"."id" DESC'
    assert names(client.get("/api/v2/jobs?order=createdTime,DESC"))[0] == "a0"
    assert names(client.get("/api/v2/jobs?order=createdTime,ASC"))[0] == "a1"


def test_the_list_filters_by_user_state_and_keyword(alice, jobs):
    client = client_for(alice)
    assert names(client.get("/api/v2/jobs?username=bob")) == ["b0"]
    assert names(client.get("/api/v2/jobs?keyword=a1")) == ["a1"]
    Job.objects.filter(name="a0").update(state=JobState.FAILED)
    assert names(client.get("/api/v2/jobs?state=FAILED")) == ["a0"]
    assert names(client.get("/api/v2/jobs?vc=default&username=alice")) == ["a2", "a1", "a0"]


def test_the_list_pages_and_counts(alice, jobs):
    response = client_for(alice).get(
        "/api/v2/jobs?offset=1&limit=2&order=name,ASC&withTotalCount=true"
    )
    assert response.json()["totalCount"] == 4
    assert names(response) == ["a1", "a2"]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("limit=1001", "limit"),
        ("limit=-1", "limit"),
        ("offset=x", "offset"),
        ("order=secret", "order"),
        ("state=NOPE", "state"),
    ],
)
def test_bad_list_parameters_get_a_400_naming_them(alice, jobs, query, field):
    response = client_for(alice).get(f"/api/v2/jobs?{query}")
    assert response.status_code == 400
    assert response.json()["message"].startswith(f"{field}:")


def test_the_config_is_v2_yaml_with_secrets_masked(bob, jobs):
    response = client_for(bob).get("/api/v2/jobs/bob~b0/config")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/yaml")
    text = response.content.decode()
    assert "topsecret" not in text
    assert "******" in text


def test_another_user_cannot_read_the_config_or_events(alice, jobs):
    client = client_for(alice)
    for path in ("config", "events"):
        assert client.get(f"/api/v2/jobs/bob~b0/{path}").status_code == 404


def test_execution_type_stop_stops_the_job(alice, jobs):
    client = client_for(alice)
    response = client.put("/api/v2/jobs/alice~a0/executionType", {"value": "STOP"}, format="json")
    assert response.status_code == 202
    assert Job.objects.get(name="a0").state == JobState.STOPPED


STOP_A0 = ("/api/v2/jobs/alice~a0/executionType", {"value": "STOP"})


@pytest.mark.parametrize("state", ["SUCCEEDED", "FAILED", "STOPPED"])
def test_stopping_a_job_that_has_already_finished_is_a_409_that_says_so(alice, jobs, state):
    Job.objects.filter(name="a0").update(state=state)
    response = client_for(alice).put(*STOP_A0, format="json")
    assert response.status_code == 409
    assert response.json()["code"] == "ConflictJobError"
    assert response.json()["message"] == f"job a0 has already finished ({state}): nothing to stop"
    assert Job.objects.get(name="a0").state == state


def test_stopping_a_job_that_is_stopping_already_is_accepted_again(alice, jobs):
    Job.objects.filter(name="a0").update(state=JobState.STOPPING)
    response = client_for(alice).put(*STOP_A0, format="json")
    assert response.status_code == 202
    assert response.json()["message"] == "job a0 is stopping already"


def test_execution_type_needs_a_known_value(alice, jobs):
    response = client_for(alice).put(
        "/api/v2/jobs/alice~a0/executionType", {"value": "PAUSE"}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["message"].startswith("value:")


def test_another_user_cannot_stop_my_job(bob, jobs):
    response = client_for(bob).put(
        "/api/v2/jobs/alice~a0/executionType", {"value": "STOP"}, format="json"
    )
    assert response.status_code == 403
    assert Job.objects.get(name="a0").state == JobState.WAITING


def test_attempts_and_events_tell_the_story_of_a_job(alice, backend):
    job = settle(backend, lifecycle.submit(alice, hello_job("story")))
    client = client_for(alice)
    attempts = client.get("/api/v2/jobs/alice~story/job-attempts").json()
    assert [(a["attemptIndex"], a["state"], a["isLatest"]) for a in attempts] == [
        (0, "SUCCEEDED", True)
    ]
    assert client.get("/api/v2/jobs/alice~story/job-attempts/0").json()["attemptIndex"] == 0
    assert client.get("/api/v2/jobs/alice~story/job-attempts/3").status_code == 404
    events = client.get("/api/v2/jobs/alice~story/events").json()["data"]
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "submitted"
    assert "task" in kinds
    assert job.state == "SUCCEEDED"


def test_a_waiting_job_says_why_in_its_events(alice, jobs):
    events = client_for(alice).get("/api/v2/jobs/alice~a0/events").json()["data"]
    assert events[-1]["kind"] == "waiting"
    assert events[-1]["message"]
