"""OpenPAI's older paths (``/api/v2/user/*``, the ``/api/v1/*`` that openpaisdk calls),
``executionType: START`` and OpenPAI's password length."""

from __future__ import annotations

import json

import pytest
import yaml
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from jobs import lifecycle
from jobs.models import Job
from tests.api.helpers import client_for, job_with_tasks
from tests.jobs.samples import hello_job, v1_job

pytestmark = pytest.mark.django_db


def test_executionType_START_of_a_running_job_is_202_and_changes_nothing(alice):
    job = job_with_tasks(alice)
    response = client_for(alice).put(
        "/api/v2/jobs/alice~hello/executionType", {"value": "START"}, format="json"
    )
    assert response.status_code == 202
    assert "started already" in response.json()["message"]
    assert Job.objects.get(pk=job.pk).state == job.state


def test_executionType_START_of_a_finished_job_is_202_and_does_not_rerun_it(alice):
    job = job_with_tasks(alice)
    Job.objects.filter(pk=job.pk).update(state="SUCCEEDED")
    response = client_for(alice).put(
        "/api/v2/jobs/alice~hello/executionType", {"value": "START"}, format="json"
    )
    assert response.status_code == 202
    assert "not run again" in response.json()["message"]
    assert Job.objects.get(pk=job.pk).state == "SUCCEEDED"


@pytest.mark.parametrize(("password", "code"), [("six666", 201), ("five5", 400)])
def test_a_password_needs_6_characters_as_in_openpai(admin, password, code):
    new = {"username": "carol", "password": password}
    response = client_for(admin).post("/api/v2/users", new, format="json")
    assert response.status_code == code
    if code == 400:
        assert response.json()["message"].startswith("password: ")


def test_the_older_user_paths_list_create_read_and_delete(admin):
    client = client_for(admin)
    created = client.post("/api/v2/user", {"username": "carol", "password": "carol-pw"})
    assert created.status_code == 201
    assert "carol" in [u["username"] for u in client.get("/api/v2/user").json()]
    assert client.get("/api/v2/user/carol").json()["username"] == "carol"
    assert client.delete("/api/v2/user/carol").status_code == 200
    assert not User.objects.filter(username="carol").exists()


def test_the_older_password_path_needs_the_old_one_from_the_user(alice):
    client = client_for(alice)
    url = "/api/v2/user/alice/password"
    wrong = client.put(url, {"oldPassword": "nope-nope", "newPassword": "brand-new"})
    assert (wrong.status_code, wrong.json()["code"]) == (400, "IncorrectPasswordError")
    right = client.put(url, {"oldPassword": "alice-secret-pw", "newPassword": "brand-new"})
    assert right.status_code == 201
    alice.refresh_from_db()
    assert alice.check_password("brand-new")


def test_an_admin_sets_anyones_password_email_admin_and_virtual_clusters(alice, admin):
    from clusters.models import VirtualCluster

    VirtualCluster.objects.create(name="research")
    client = client_for(admin)
    assert (
        client.put("/api/v2/user/alice/password", {"newPassword": "set-by-admin"}).status_code
        == 201
    )
    assert client.put("/api/v2/user/alice/email", {"email": "a@x.org"}).status_code == 201
    assert client.put("/api/v2/user/alice/admin", {"admin": True}).status_code == 201
    vcs = client.put("/api/v2/user/alice/virtualcluster", {"virtualCluster": "research"})
    assert vcs.status_code == 201
    alice.refresh_from_db()
    assert alice.check_password("set-by-admin") and alice.email == "a@x.org" and alice.is_staff
    assert list(alice.virtual_clusters.values_list("name", flat=True)) == ["research"]


def test_a_user_may_not_make_themself_admin_nor_change_others(alice, bob):
    client = client_for(bob)
    assert client.put("/api/v2/user/bob/admin", {"admin": True}).status_code == 403
    assert client.put("/api/v2/user/alice/email", {"email": "b@x.org"}).status_code == 403


def test_the_older_grouplist_path_sets_the_groups(alice, admin):
    from django.contrib.auth.models import Group

    Group.objects.create(name="team")
    response = client_for(admin).put(
        "/api/v2/user/alice/grouplist", {"grouplist": ["team"]}, format="json"
    )
    assert response.status_code == 201
    assert list(alice.groups.values_list("name", flat=True)) == ["team"]


def test_v1_token_then_submit_list_read_ssh_and_stop_as_openpaisdk_does(alice):
    client = APIClient()
    body = {"username": "alice", "password": "alice-secret-pw", "expiration": 3600}
    token = client.post("/rest-server/api/v1/token", body, format="json").json()["token"]
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    job = json.dumps(v1_job("v1job", "echo hi"))
    submitted = client.post(
        "/rest-server/api/v1/user/alice/jobs", job, content_type="application/json"
    )
    assert submitted.status_code == 202
    assert [j["name"] for j in client.get("/rest-server/api/v1/user/alice/jobs").json()] == [
        "v1job"
    ]
    detail = client.get("/rest-server/api/v1/user/alice/jobs/v1job").json()
    assert detail["jobStatus"]["state"] == "WAITING"
    ssh = client.get("/rest-server/api/v1/user/alice/jobs/v1job/ssh").json()
    assert set(ssh) >= {"containers", "keyPair"}
    stop = client.put(
        "/rest-server/api/v1/user/alice/jobs/v1job/executionType", {"value": "STOP"}, format="json"
    )
    assert stop.status_code == 202


def test_v1_submitting_as_another_user_is_403(alice, bob):
    job = json.dumps(v1_job("v1job", "echo hi"))
    response = client_for(bob).post("/api/v1/user/alice/jobs", job, content_type="application/json")
    assert (response.status_code, response.json()["code"]) == (403, "ForbiddenUserError")
    assert not Job.objects.exists()


def test_v1_lists_only_the_named_users_jobs(alice, bob):
    job_with_tasks(alice)
    job_with_tasks(bob, "bobs")
    names = [j["name"] for j in client_for(alice).get("/api/v1/user/bob/jobs").json()]
    assert names == ["bobs"]


def test_v1_virtual_clusters_have_numbers_only_for_openpaisdks_arithmetic(alice):
    vcs = client_for(alice).get("/api/v1/virtual-clusters").json()
    total, used = vcs["default"]["resourcesTotal"], vcs["default"]["resourcesUsed"]
    assert {k: int(total[k] - used[k]) for k in total}  # openpaisdk's available_resources
    assert "gpuTypes" not in total
    one = client_for(alice).get("/api/v1/virtual-clusters/default").json()
    assert "gpuTypes" not in one["resourcesUsed"]


def test_v1_user_reads_the_user(alice):
    body = client_for(alice).get("/api/v1/user/alice").json()
    assert body["username"] == "alice" and "virtualCluster" in body


def v1_config(client: APIClient, **headers: str):
    return client.get("/rest-server/api/v1/user/alice/jobs/hello/config", headers=headers)


def test_v1_job_config_answers_json_with_secrets_masked(alice):
    lifecycle.submit(alice, hello_job("hello", secrets="{token: s3cret-value}"))
    response = v1_config(client_for(alice), Accept="*/*")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    config = response.json()  # openpaisdk's ``rest_api_jobs(job, "config")``
    assert config["name"] == "hello"
    assert config["taskRoles"]["main"]["commands"] == ["echo hello"]
    assert config["secrets"] == {"token": "******"}
    assert "s3cret-value" not in response.content.decode()


def test_v1_job_config_answers_yaml_to_a_client_that_prefers_it(alice):
    lifecycle.submit(alice, hello_job("hello"))
    response = v1_config(client_for(alice), Accept="text/yaml")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/yaml"
    assert yaml.safe_load(response.content)["name"] == "hello"


def test_v1_job_config_of_another_users_job_is_404(alice, bob):
    lifecycle.submit(alice, hello_job("hello"))
    assert v1_config(client_for(bob)).status_code == 404


def test_v2_job_config_answers_its_yaml_to_a_client_asking_for_yaml(alice):
    lifecycle.submit(alice, hello_job("hello"))
    response = client_for(alice).get(
        "/api/v2/jobs/alice~hello/config", headers={"Accept": "text/yaml"}
    )
    assert response.status_code == 200  # DRF's JSON-only negotiation answered 406
    assert yaml.safe_load(response.content)["name"] == "hello"
