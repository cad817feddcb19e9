"""Job tags (``PUT/DELETE .../tag``, the ``tag`` list filter) and task logs."""

from __future__ import annotations

import pytest

from jobs import lifecycle
from tests.api.helpers import client_for, job_with_tasks
from tests.jobs.helpers import settle
from tests.jobs.samples import hello_job

pytestmark = pytest.mark.django_db

TAG = "/api/v2/jobs/alice~hello/tag"
LOG = "/api/v2/jobs/alice~hello/attempts/0/tasks/main-0/logs/{}"


def test_the_owner_tags_a_job_and_the_list_filters_by_tag(alice):
    job_with_tasks(alice)
    job_with_tasks(alice, "other")
    client = client_for(alice)
    response = client.put(TAG, {"value": "nightly"}, format="json")
    assert response.status_code == 200
    assert response.json()["tags"] == ["nightly"]
    listed = client.get("/api/v2/jobs?tag=nightly").json()
    assert [j["name"] for j in listed] == ["hello"]
    assert client.get("/api/v2/jobs/alice~hello").json()["jobStatus"]["tags"] == ["nightly"]


def test_tagging_twice_keeps_one_tag_and_delete_removes_it(alice):
    job_with_tasks(alice)
    client = client_for(alice)
    client.put(TAG, {"value": "x"}, format="json")
    client.put(TAG, {"value": "x"}, format="json")
    response = client.delete(TAG, {"value": "x"}, format="json")
    assert response.json()["tags"] == []
    assert client.delete(TAG, {"value": "x"}, format="json").status_code == 404


@pytest.mark.parametrize(
    ("method", "value", "expected"),
    [("put", "mine", ["old", "theirs", "mine"]), ("delete", "old", ["theirs"])],
)
def test_a_tag_changed_alongside_by_another_request_is_not_lost(
    alice, monkeypatch, method, value, expected
):
    from jobs.api import task_views
    from jobs.models import Job

    job = job_with_tasks(alice)
    Job.objects.filter(pk=job.pk).update(tags=["old"])
    real = task_views.job_for

    def read_then_meanwhile(*args):  # this request reads the job, then another one tags it
        found = real(*args)
        Job.objects.filter(pk=job.pk).update(tags=["old", "theirs"])
        return found

    monkeypatch.setattr(task_views, "job_for", read_then_meanwhile)
    response = getattr(client_for(alice), method)(TAG, {"value": value}, format="json")
    assert response.status_code == 200
    assert Job.objects.get(pk=job.pk).tags == expected == response.json()["tags"]


def test_a_bad_tag_gets_a_400_naming_the_value(alice):
    job_with_tasks(alice)
    response = client_for(alice).put(TAG, {"value": "no spaces"}, format="json")
    assert response.status_code == 400
    assert response.json()["message"].startswith("value:")


@pytest.mark.parametrize(("persona", "code"), [("bob", 403), ("admin", 200), (None, 401)])
def test_who_may_tag(alice, bob, admin, persona, code):
    job_with_tasks(alice)
    user = {"bob": bob, "admin": admin, None: None}[persona]
    assert client_for(user).put(TAG, {"value": "t"}, format="json").status_code == code


@pytest.fixture
def finished(alice, backend):
    job = lifecycle.submit(alice, hello_job("hello", command="echo line-one; echo line-two"))
    return settle(backend, job)


def test_the_owner_reads_a_task_log_as_text(alice, finished):
    response = client_for(alice).get(LOG.format("stdout"))
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    assert response.streaming  # the whole log is streamed, chunk by chunk
    assert "line-one\nline-two" in response.getvalue().decode()


def test_tail_keeps_only_the_last_bytes(alice, finished):
    response = client_for(alice).get(LOG.format("stdout") + "?tail=9")
    assert response.content.decode() == "line-two\n"


@pytest.mark.parametrize(
    ("path", "code"),
    [
        (LOG.format("secrets"), 404),
        ("/api/v2/jobs/alice~hello/attempts/0/tasks/main-7/logs/stdout", 404),
        (LOG.format("stdout") + "?tail=-1", 400),
    ],
)
def test_bad_log_requests_are_4xx(alice, finished, path, code):
    assert client_for(alice).get(path).status_code == code


@pytest.mark.parametrize(("persona", "code"), [("bob", 404), ("admin", 200), (None, 401)])
def test_who_may_read_logs(alice, bob, admin, finished, persona, code):
    user = {"bob": bob, "admin": admin, None: None}[persona]
    assert client_for(user).get(LOG.format("stderr")).status_code == code
