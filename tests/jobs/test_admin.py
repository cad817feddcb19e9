"""The Django admin shows no job's SSH private key nor its secrets, even to a superuser."""

from __future__ import annotations

import pytest

from jobs import lifecycle
from jobs.plugins.ssh.keys import job_keys
from tests.jobs.samples import hello_job

pytestmark = pytest.mark.django_db

SECRET = "hunter2-admin-secret"


def test_the_admin_shows_neither_the_private_key_nor_a_secret(client, alice, admin):
    job = lifecycle.submit(alice, hello_job("keyed", secrets=f"{{pw: {SECRET}}}"))
    private, public = job_keys(job)
    key_body = private.splitlines()[1]  # a line of the key itself, whatever the escaping
    client.force_login(admin)
    pages = [
        client.get(f"/admin/jobs/job/{job.id}/change/"),
        client.get("/admin/jobs/job/"),
        client.get(f"/admin/jobs/job/?q={job.name}"),
    ]
    for page in pages:
        assert page.status_code == 200
        text = page.content.decode()
        assert key_body not in text and "PRIVATE KEY" not in text
        assert SECRET not in text
    assert "keyed" in pages[0].content.decode()


def test_the_admin_offers_no_raw_add_or_change_form_for_jobs(client, alice, admin):
    job = lifecycle.submit(alice, hello_job("waiting"))
    client.force_login(admin)
    listing = client.get("/admin/jobs/job/").content.decode()
    assert "/admin/jobs/job/add/" not in listing
    assert client.get("/admin/jobs/job/add/").status_code == 403
    for model in ("jobattempt", "task", "jobevent"):
        assert client.get(f"/admin/jobs/{model}/add/").status_code == 403
    page = client.post(f"/admin/jobs/job/{job.id}/change/", {"name": "renamed", "state": "RUNNING"})
    assert page.status_code == 403
    job.refresh_from_db()
    assert (job.name, job.state) == ("waiting", "WAITING")


def test_the_admin_deletes_an_ended_job_but_not_a_waiting_one(client, alice, admin):
    from jobs.models import Job

    waiting = lifecycle.submit(alice, hello_job("waiting"))
    ended = lifecycle.submit(alice, hello_job("ended"))
    lifecycle.stop(ended, alice)
    ended.refresh_from_db()
    assert ended.state == "STOPPED"
    client.force_login(admin)
    assert client.post(f"/admin/jobs/job/{waiting.id}/delete/", {"post": "yes"}).status_code == 403
    client.post(f"/admin/jobs/job/{ended.id}/delete/", {"post": "yes"})
    assert list(Job.objects.values_list("name", flat=True)) == ["waiting"]
