"""A secret a task prints never comes back in clear: not in the job page's log tails, the log
page, its follow-up tails and download, nor the API's task logs."""

from __future__ import annotations

import pytest

from jobs import lifecycle
from tests.api.helpers import client_for
from tests.jobs.helpers import settle
from tests.jobs.samples import hello_job

pytestmark = pytest.mark.django_db

SECRETS = "{token: s3cr3t-value, db: {password: hunter2-pass}, pin: 4711, short: ab}"
COMMAND = (
    "echo token=<% $secrets.token %> db=<% $secrets.db.password %> pin=<% $secrets.pin %>"
    " short=<% $secrets.short %>"
)
PAGE = "/jobs/alice~hello/"
LOG_PAGE = "/jobs/alice~hello/logs/0/main-0/stdout/"
API_LOG = "/api/v2/jobs/alice~hello/attempts/0/tasks/main-0/logs/stdout"


@pytest.fixture
def echoed(alice, backend):
    """A finished job whose task echoed every one of its secrets."""
    job = settle(backend, lifecycle.submit(alice, hello_job(command=COMMAND, secrets=SECRETS)))
    task = job.attempts.get().tasks.get()
    assert b"s3cr3t-value" in backend.read_log(task.backend_ref, "stdout")  # it did print it
    return job


def assert_masked(text: str) -> None:
    assert "token=****** db=****** pin=****** short=ab" in text
    for secret in ("s3cr3t-value", "hunter2-pass", "4711"):
        assert secret not in text


@pytest.mark.parametrize("path", [PAGE, PAGE + "live/"])
def test_the_job_page_tails_logs_with_the_secrets_masked(web, echoed, path):
    assert_masked(web.get(path).content.decode())


@pytest.mark.parametrize("path", [LOG_PAGE, LOG_PAGE + "view/", LOG_PAGE + "tail/"])
def test_the_log_page_its_tail_and_download_mask_the_secrets(web, echoed, path):
    response = web.get(path)
    assert response.status_code == 200
    assert_masked(response.getvalue().decode())  # the download is streamed


def test_the_api_task_log_masks_the_secrets(alice, echoed):
    response = client_for(alice).get(API_LOG)
    assert response.status_code == 200
    assert_masked(response.getvalue().decode())


def test_a_tail_that_starts_inside_a_secret_masks_all_of_it(alice, echoed):
    # "...db=hunter2-pass pin=4711 short=ab\n": 28 bytes start at "ter2-pass".
    response = client_for(alice).get(API_LOG + "?tail=28")
    assert response.content.decode() == "****** pin=****** short=ab\n"
