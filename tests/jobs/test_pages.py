"""The pages: log in, submit by pasting, list, detail with live part, stop."""

from __future__ import annotations

import pytest
from django.test import Client

from jobs import lifecycle
from jobs.models import Job
from jobs.states import JobState
from tests.jobs.helpers import settle
from tests.jobs.samples import hello_job

pytestmark = pytest.mark.django_db

HELLO = hello_job(
    command="echo hello <% $secrets.token %> | wc -c", secrets="{token: s3cr3t-value}"
)


def test_the_login_page_logs_a_user_in(alice):
    client = Client()
    assert client.get("/login/").status_code == 200
    response = client.post("/login/", {"username": "alice", "password": "alice-secret-pw"})
    assert response.status_code == 302
    assert client.get("/jobs/").status_code == 200


def test_pages_send_anonymous_visitors_to_the_login_page(db):
    response = Client().get("/jobs/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_submitting_a_pasted_job_leads_to_its_page(web):
    response = web.post("/jobs/submit/", {"text": HELLO})
    assert response.status_code == 302
    assert response["Location"] == "/jobs/alice~hello/"
    assert Job.objects.get().state == JobState.WAITING


def test_a_bad_pasted_job_shows_every_error_with_a_400(web):
    response = web.post("/jobs/submit/", {"text": HELLO.replace("cpu: 1", "cpu: -1")})
    assert response.status_code == 400
    assert b"taskRoles.main.resourcePerInstance.cpu" in response.content
    assert not Job.objects.exists()


def test_an_empty_submission_names_the_field(web):
    response = web.post("/jobs/submit/", {"text": ""})
    assert response.status_code == 400
    assert b"<code>text: This field is required.</code>" in response.content


def test_a_huge_submission_gets_a_400(web):
    response = web.post("/jobs/submit/", {"text": "a" * (5 * 1024 * 1024)})
    assert response.status_code == 400
    assert b"limit" in response.content


def test_the_job_list_shows_my_jobs_newest_first(web, alice, bob):
    lifecycle.submit(alice, HELLO)
    lifecycle.submit(alice, HELLO.replace("name: hello", "name: second"))
    lifecycle.submit(bob, HELLO.replace("name: hello", "name: bobs"))
    body = web.get("/jobs/").content.decode()
    assert body.index("second") < body.index("hello")
    assert "bobs" not in body


def test_the_detail_page_shows_tasks_logs_and_masks_secrets(web, alice, backend):
    job = settle(backend, lifecycle.submit(alice, HELLO))
    body = web.get("/jobs/alice~hello/").content.decode()
    assert "SUCCEEDED" in body
    assert "main-0" in body
    assert "127.0.0.1" in body
    assert "s3cr3t-value" not in body
    assert "******" in body
    assert f"ws/jobs/{job.id}/" in body


def test_the_live_part_is_served_alone(web, alice, backend):
    settle(backend, lifecycle.submit(alice, HELLO))
    response = web.get("/jobs/alice~hello/live/")
    assert response.status_code == 200
    assert b"main-0" in response.content
    assert b"<html" not in response.content


def test_a_task_log_can_be_downloaded_whole(web, alice, backend):
    settle(backend, lifecycle.submit(alice, HELLO))
    response = web.get("/jobs/alice~hello/logs/0/main-0/stdout/")
    assert response.status_code == 200
    assert response.streaming
    assert response.getvalue().strip().isdigit(), response.getvalue()
    assert "attachment" in response["Content-Disposition"]


def test_another_user_gets_my_jobs_status_and_404_for_its_live_part_logs_and_stop(
    alice, bob, backend
):
    settle(backend, lifecycle.submit(alice, HELLO))
    client = Client()
    client.force_login(bob)
    assert 'id="summary-only"' in client.get("/jobs/alice~hello/").content.decode()
    assert client.get("/jobs/alice~hello/live/").status_code == 404
    assert client.get("/jobs/alice~hello/logs/0/main-0/stdout/").status_code == 404
    assert client.post("/jobs/alice~hello/stop/").status_code == 404


def test_the_stop_button_stops_a_job(web, alice):
    job = lifecycle.submit(alice, HELLO)
    response = web.post("/jobs/alice~hello/stop/")
    assert response.status_code == 302
    job.refresh_from_db()
    assert job.state == JobState.STOPPED


def test_the_submit_form_picks_a_deployment(web, backend):
    text = (
        HELLO + "deployments:\n  - name: prod\n    taskRoles: {main: {preCommands: [echo pre]}}\n"
    )
    response = web.post("/jobs/submit/", {"text": text, "deployment": "prod"})
    assert response.status_code == 302
    job = settle(backend, Job.objects.get())
    task = job.attempts.get().tasks.get()
    assert backend.read_log(task.backend_ref, "stdout").startswith(b"pre")
