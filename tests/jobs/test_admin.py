"""The Django admin shows no job's SSH private key nor its secrets, even to a superuser."""

from __future__ import annotations

import pytest

from jobs import lifecycle
from jobs.plugins.ssh import job_keys
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
