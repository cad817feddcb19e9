"""The API for scripts: OpenPAI's login, bearer tokens, submit and job detail."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from jobs.models import Job
from tests.jobs.helpers import settle
from tests.jobs.samples import hello_job, v1_job

pytestmark = pytest.mark.django_db

HELLO = hello_job()

V1 = v1_job("hello_v1", "echo v1")


def token_for(username: str, password: str, as_json: bool = False) -> dict:
    client = APIClient()
    body = {"username": username, "password": password, "expiration": 3600}
    response = client.post("/api/v2/authn/basic/login", body, format="json" if as_json else None)
    assert response.status_code == 200, response.content
    return response.json()


@pytest.fixture
def api(alice) -> APIClient:
    client = APIClient()
    token = token_for("alice", "alice-secret-pw")["token"]
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def submit(client: APIClient, text: str | bytes, content_type: str = "text/yaml"):
    return client.generic("POST", "/api/v2/jobs", text, content_type=content_type)


def test_login_with_a_form_answers_token_user_and_admin(alice):
    body = token_for("alice", "alice-secret-pw")
    assert body["user"] == "alice"
    assert body["admin"] is False
    assert len(body["token"]) > 30


def test_login_with_json_works_too_and_says_admin_for_admins(admin):
    body = token_for("admin", "admin-secret-pw", as_json=True)
    assert body["admin"] is True


def test_the_v1_login_path_answers_the_same(alice):
    response = APIClient().post(
        "/api/v1/authn/basic/login", {"username": "alice", "password": "alice-secret-pw"}
    )
    assert response.status_code == 200
    assert response.json()["user"] == "alice"


def test_a_wrong_password_is_refused_with_openpais_400(alice):
    response = APIClient().post(
        "/api/v2/authn/basic/login", {"username": "alice", "password": "nope"}
    )
    assert (response.status_code, response.json()["code"]) == (400, "IncorrectPasswordError")
    assert response.json()["message"] == "Password is incorrect."


def test_login_without_a_password_names_the_field(alice):
    response = APIClient().post("/api/v2/authn/basic/login", {"username": "alice"})
    assert response.status_code == 400
    assert "password" in response.json()["message"]


def test_an_unknown_token_is_refused(db):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer not-a-token")
    assert client.get("/api/v2/jobs/alice~x").status_code == 401


def test_an_anonymous_call_is_refused(db):
    response = submit(APIClient(), HELLO)
    assert response.status_code in (401, 403)
    assert not Job.objects.exists()


def test_a_yaml_job_is_accepted_with_202(api):
    response = submit(api, HELLO)
    assert response.status_code == 202, response.content
    job = Job.objects.get()
    assert (job.owner.username, job.name, job.state) == ("alice", "hello", "WAITING")


def test_a_v1_json_job_is_accepted_with_202(api):
    response = submit(api, json.dumps(V1), "application/json")
    assert response.status_code == 202, response.content
    assert Job.objects.get().source_format == "v1"


def test_a_second_job_with_the_same_name_is_a_conflict(api):
    assert submit(api, HELLO).status_code == 202
    response = submit(api, HELLO)
    assert response.status_code == 409
    assert "hello" in response.json()["message"]


UNKNOWN_ROLE = HELLO + (
    "deployments:\n"
    "  - name: d\n"
    "    taskRoles: {ghost: {preCommands: [echo x]}}\n"
    "defaults: {deployment: d}\n"
)


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("", "the job file is empty"),
        ("{not: yaml: at all", "line"),
        ("- just\n- a list\n", "a job must be an object (a mapping of fields), got a list"),
        (HELLO.replace("cpu: 1", 'cpu: "four"'), "taskRoles.main.resourcePerInstance.cpu"),
        (HELLO.replace("echo hello", "echo <% $parameters.nothing %>"), "taskRoles.main.commands"),
        (UNKNOWN_ROLE, 'deployments[0].taskRoles.ghost: no task role named "ghost"'),
        ("x: " + "a" * (5 * 1024 * 1024), "job file: more than the limit of"),
    ],
    ids=[
        "empty",
        "not-yaml",
        "not-a-mapping",
        "wrong-type",
        "unknown-reference",
        "unknown-role",
        "five-megabytes",
    ],
)
def test_bad_jobs_get_a_400_that_names_the_field(api, body, needle):
    response = submit(api, body)
    assert response.status_code == 400, response.content
    payload = response.json()
    assert payload["errors"]
    assert needle in payload["message"]
    assert not Job.objects.exists()


def test_bytes_that_are_not_utf8_get_a_400(api):
    response = submit(api, b"\xff\xfe\x00garbage")
    assert response.status_code == 400


def test_job_detail_has_openpai_shape(api, alice, backend):
    submit(api, HELLO)
    settle(backend, Job.objects.get())
    response = api.get("/api/v2/jobs/alice~hello")
    assert response.status_code == 200
    body = response.json()
    assert body["name"] == "hello"
    assert body["jobStatus"]["state"] == "SUCCEEDED"
    assert body["jobStatus"]["retries"] == 0
    (status,) = body["taskRoles"]["main"]["taskStatuses"]
    assert status["taskIndex"] == 0
    assert status["taskState"] == "SUCCEEDED"
    assert status["containerIp"] == "127.0.0.1"
    assert set(status["containerPorts"]) == {"http"}
    assert status["containerExitCode"] == 0


def test_a_specific_attempt_can_be_read(api, backend):
    submit(api, HELLO)
    settle(backend, Job.objects.get())
    assert api.get("/api/v2/jobs/alice~hello/attempts/0").status_code == 200
    assert api.get("/api/v2/jobs/alice~hello/attempts/5").status_code == 404


def test_with_jobs_private_another_user_gets_404_for_my_job(api, bob, settings):
    settings.JOBS_PRIVATE = True
    submit(api, HELLO)
    client = APIClient()
    token = token_for("bob", "bob-secret-pw")["token"]
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    response = client.get("/api/v2/jobs/alice~hello")
    assert response.status_code == 404


def test_an_admin_reads_any_job(api, admin):
    submit(api, HELLO)
    client = APIClient()
    client.force_authenticate(admin)
    assert client.get("/api/v2/jobs/alice~hello").status_code == 200


def test_the_v2_json_schema_is_served_to_anyone(db):
    response = APIClient().get("/api/v2/job-protocol/schema.json")
    assert response.status_code == 200
    schema = response.json()
    assert schema["$schema"].startswith("https://json-schema.org/")
    assert "taskRoles" in schema["properties"]


def test_a_deployment_can_be_chosen_at_submit_time(api):
    text = hello_job() + "deployments:\n  - name: prod\n    taskRoles: {main: {preCommands: [a]}}\n"
    assert (
        submit(
            api,
            text + "  - name: dev\n    taskRoles: {main: {preCommands: [b]}}\n",
        ).status_code
        == 202
    )
    assert Job.objects.get().protocol["defaults"].get("deployment") is None
    response = api.generic(
        "POST",
        "/api/v2/jobs?deployment=nope",
        text.replace("name: hello", "name: h2"),
        content_type="text/yaml",
    )
    assert response.status_code == 400
    assert "deployment" in response.json()["message"]
    response = api.generic(
        "POST",
        "/api/v2/jobs?deployment=prod",
        text.replace("name: hello", "name: h3"),
        content_type="text/yaml",
    )
    assert response.status_code == 202
    assert Job.objects.get(name="h3").protocol["defaults"]["deployment"] == "prod"
