"""Status codes as OpenPAI's clients expect them: basicLogin with a wrong password is a 400
IncorrectPasswordError (an unknown name NoUserError), and updateJobExecutionType on another
user's job is a 403."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from clusters.models import VirtualCluster
from jobs.models import Job
from tests.api.helpers import client_for, job_with_tasks

pytestmark = pytest.mark.django_db

LOGIN = "/api/v2/authn/basic/login"
STOP = {"value": "STOP"}


@pytest.mark.parametrize(
    ("username", "code"), [("alice", "IncorrectPasswordError"), ("nobody", "NoUserError")]
)
def test_basicLogin_with_a_wrong_password_or_an_unknown_name_is_a_400(alice, username, code):
    response = APIClient().post(LOGIN, {"username": username, "password": "wrong-pw"})
    assert (response.status_code, response.json()["code"]) == (400, code)


def test_basicLogin_under_rest_server_with_a_slash_answers_the_same(alice):
    response = APIClient().post(f"/rest-server{LOGIN}/", {"username": "alice", "password": "x"})
    assert response.status_code == 400


def test_updateJobExecutionType_of_another_users_job_is_403(alice, bob):
    job = job_with_tasks(alice)
    VirtualCluster.objects.filter(pk=job.virtual_cluster_id).update(open_to_all=True)
    url = "/api/v2/jobs/alice~hello/executionType"
    response = client_for(bob).put(url, STOP, format="json")
    assert (response.status_code, response.json()["code"]) == (403, "ForbiddenUserError")
    assert Job.objects.get(pk=job.pk).state == job.state


def test_updateJobExecutionType_of_a_job_bob_cannot_list_stays_404(alice, bob):
    job = job_with_tasks(alice)
    private = VirtualCluster.objects.create(name="private")
    Job.objects.filter(pk=job.pk).update(virtual_cluster=private)
    response = client_for(bob).put("/api/v2/jobs/alice~hello/executionType", STOP, format="json")
    assert response.status_code == 404


def test_updateJobExecutionType_by_the_owner_and_an_admin_still_stops(alice, admin):
    job_with_tasks(alice)
    job_with_tasks(alice, "second")
    first = client_for(alice).put("/api/v2/jobs/alice~hello/executionType", STOP, format="json")
    second = client_for(admin).put("/api/v2/jobs/alice~second/executionType", STOP, format="json")
    assert (first.status_code, second.status_code) == (202, 202)
