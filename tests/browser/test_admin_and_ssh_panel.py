"""Two of issue 28's defects, in Chromium: Django's admin offers no raw form to add or change a
job (an ended one may be deleted), and the SSH panel tells the truth on the local backend when
the machine the tasks run on has no sshd (it once said "run it in an image with sshd", though
local tasks use no image)."""

from __future__ import annotations

import pytest

from clusters import registry
from jobs import lifecycle
from jobs.models import Job
from tests.browser.pages import log_in
from tests.browser.test_portal_flows import SSH, job
from tests.waiting import wait_for

pytestmark = pytest.mark.browser


def test_the_admin_shows_jobs_to_read_and_deletes_only_an_ended_one(
    portal_url, browser_page, alice, admin
):
    admin.set_password("admin-secret-pw")
    admin.save()
    running = lifecycle.submit(alice, job("still-running", "sleep 120"))
    ended = lifecycle.submit(alice, job("ended-long-ago", "true"))
    Job.objects.filter(id=ended.id).update(state="SUCCEEDED")
    page = browser_page
    log_in(page, portal_url, "admin", "admin-secret-pw")

    page.goto(f"{portal_url}/admin/jobs/job/")
    assert page.locator(".object-tools a.addlink").count() == 0  # no "Add job" button
    assert page.locator("#nav-sidebar .model-job a.addlink").count() == 0  # nor in the menu
    assert page.locator("#nav-sidebar .model-virtualcluster a.addlink").count() == 1
    assert page.locator("#result_list").inner_text().count("alice") == 2
    page.goto(f"{portal_url}/admin/jobs/job/{running.id}/change/")
    assert page.locator("form input[type=submit][name=_save]").count() == 0  # nothing to save
    assert page.locator("form input[type=text], form select, form textarea").count() == 0
    assert page.locator("a.deletelink").count() == 0  # a live job is stopped, not deleted
    assert "still-running" in page.locator("#content").inner_text()

    page.goto(f"{portal_url}/admin/jobs/job/{ended.id}/change/")
    page.click("a.deletelink")
    page.click("form input[type=submit]")  # "Yes, I'm sure"
    page.locator(".messagelist", has_text="was deleted successfully").wait_for()
    assert not Job.objects.filter(id=ended.id).exists()
    assert Job.objects.filter(id=running.id).exists()


@pytest.fixture
def no_sshd_for_tasks(settings) -> None:
    """The tasks' machine without sshd: /usr/sbin hidden from every task (before the backend
    is made, so its sandbox hides it)."""
    settings.LOCAL_SANDBOX_HIDE = ["/usr/sbin"]
    settings.LOCAL_IMAGES = ""
    registry.get_backend.cache_clear()  # an autouse fixture may have built it already


def test_the_ssh_panel_names_the_host_when_local_tasks_find_no_sshd(
    no_sshd_for_tasks, portal_url, browser_page, alice
):
    # Submitted here, so that this process's passes (whose backend hides /usr/sbin) launch it.
    lifecycle.submit(alice, job("no-sshd", "sleep 120", SSH))
    page = browser_page
    log_in(page, portal_url, "alice", "alice-secret-pw")
    page.goto(f"{portal_url}/jobs/alice~no-sshd/")
    row = page.locator("#ssh-trainer-0 .sshd-none")
    row.wait_for()
    assert row.inner_text() == (
        "Nobody can ssh into this task: no sshd on the machine the task runs on."
    )
    how = page.locator("#sshd-how").inner_text()
    assert "openssh-server" in how and "image with sshd" not in how
    assert page.locator("#ssh .ssh-command").count() == 0
    wait_for(lambda: page.locator("#live .summary .state").inner_text() == "RUNNING")
