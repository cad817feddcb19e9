"""Who sees what of a job: any signed-in user who may list it sees its status summary (API
detail and attempts, and its page); config, logs, addresses, ports, SSH and terminal stay its
owner's and admins'. ``JOBS_PRIVATE`` hides other users' jobs entirely."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.utils import timezone

from clusters.models import VirtualCluster
from jobs import exitspec, lifecycle
from jobs.models import Job, Task
from jobs.plugins.ssh.keys import job_keys
from tests.api.helpers import client_for
from tests.jobs.samples import hello_job

pytestmark = pytest.mark.django_db

SECRET = "s3cr3t-token-value"
URL = "/api/v2/jobs/alice~hello"
# What a non-owner's answer must not hold: the task's IP, its ports, its node, its pod, its log
# URL, the job's key and its secret.
PRIVATE = (
    "10.0.0.5", "22022", "8080", "node-7", "pod-1234", "/logs/", "ssh-ed25519", SECRET,
    "ValueError: bad",  # the log line the reason quotes
)  # fmt: skip


def shows(text: str, private: str) -> bool:
    """Whether ``text`` holds ``private``; a port only as a number of its own, not inside
    another (a time's microseconds, ``05:04:11.220222``, hold 22022)."""
    return re.search(rf"(?<!\d){re.escape(private)}(?!\d)", text) is not None


@pytest.fixture
def job(alice) -> Job:
    """alice's failed job in the default VC (open to all), with a secret, a key and a task that
    ran on node-7 at 10.0.0.5 with ports 8080 and 22022."""
    job = lifecycle.submit(alice, hello_job(secrets=f"{{token: {SECRET}}}"))
    job_keys(job)
    attempt = job.attempts.create(number=0, key=f"k-{job.id}", state="FAILED")
    log = f"Traceback (most recent call last):\n  File t.py\nValueError: bad {SECRET[:3]}\n"
    spec = exitspec.explain(1, "", log)
    assert spec is not None
    Task.objects.create(
        attempt=attempt, role="main", index=0, state="FAILED", ip="10.0.0.5", node="node-7",
        ports={"http": [8080], "ssh": [22022]}, backend_ref="k-pod/pod-1234", exit_code=1,
        diagnostics="exited 1 on 10.0.0.5", exit_spec=spec.as_dict(), started_at=timezone.now(),
        completed_at=timezone.now(),
    )  # fmt: skip
    reason = (
        "task role 'main': 1 of 1 tasks failed (minFailedInstances 1); main-0 exited with code 1"
        f' ({spec.phrase} — "{spec.quote}"; exited 1 on 10.0.0.5)'
    )
    Job.objects.filter(pk=job.pk).update(state="FAILED", exit_code=1, reason=reason)
    return Job.objects.get(pk=job.pk)


def page_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_another_user_reads_the_status_summary_of_a_job(job, bob):
    response = client_for(bob).get(URL)
    assert response.status_code == 200
    body = response.json()
    assert body["jobStatus"]["state"] == "FAILED"
    assert body["jobStatus"]["appExitCode"] == 1
    assert body["jobStatus"]["appExitSpec"]["phrase"] == "Python exception ValueError"
    assert body["jobStatus"]["submissionTime"] is not None
    assert body["jobStatus"]["appExitDiagnostics"].endswith(
        "(Python exception ValueError; exited 1 on <address>)"
    )
    (task,) = body["taskRoles"]["main"]["taskStatuses"]
    assert (task["taskState"], task["containerExitCode"]) == ("FAILED", 1)
    assert task["completedTime"] is not None


def test_the_summary_holds_no_ip_port_log_url_key_or_secret(job, bob):
    for path in (URL, f"{URL}/attempts/0", f"{URL}/job-attempts", f"{URL}/job-attempts/0"):
        text = client_for(bob).get(path).content.decode()
        for private in PRIVATE:
            assert not shows(text, private), (path, private)


def test_the_job_list_gives_another_user_the_masked_reason(job, bob, alice):
    (theirs,) = client_for(bob).get("/api/v2/jobs?username=alice").json()
    assert "10.0.0.5" not in theirs["reason"] and "ValueError: bad" not in theirs["reason"]
    (mine,) = client_for(alice).get("/api/v2/jobs?username=alice").json()
    assert "10.0.0.5" in mine["reason"]


def test_the_summary_leaves_out_log_lines_of_the_exit_spec(job, bob):
    spec = client_for(bob).get(URL).json()["jobStatus"]["appExitSpec"]
    assert spec["matchedLines"] == []
    assert spec["reason"] == "Python exception ValueError"


def test_the_owner_and_an_admin_read_everything(job, alice, admin):
    for user in (alice, admin):
        (task,) = client_for(user).get(URL).json()["taskRoles"]["main"]["taskStatuses"]
        assert (task["containerIp"], task["containerNodeName"]) == ("10.0.0.5", "node-7")
        assert task["containerPorts"] == {"http": "8080", "ssh": "22022"}
        assert "/logs/stdout" in task["containerLog"]


@pytest.mark.parametrize("path", ["config", "ssh", "events", "attempts/0/tasks/main-0/logs/stdout"])
def test_config_ssh_events_and_logs_stay_the_owners(job, bob, path):
    assert client_for(bob).get(f"{URL}/{path}").status_code == 404


def test_a_job_in_a_virtual_cluster_the_user_cannot_use_stays_404(job, bob):
    Job.objects.filter(pk=job.pk).update(virtual_cluster=VirtualCluster.objects.create(name="p"))
    assert client_for(bob).get(URL).status_code == 404


def test_another_users_job_page_shows_its_status_only(job, bob):
    response = page_client(bob).get("/jobs/alice~hello/")
    assert response.status_code == 200
    page = response.content.decode()
    assert 'id="summary-only"' in page
    assert "Python exception ValueError" in page and "FAILED" in page
    for private in PRIVATE:
        assert not shows(page, private), private
    assert "Stop" not in page and "terminal" not in page


def test_the_owners_page_still_shows_everything(job, alice):
    page = page_client(alice).get("/jobs/alice~hello/").content.decode()
    assert "10.0.0.5" in page and 'id="summary-only"' not in page


@pytest.mark.parametrize(
    "path", ["live/", "config.yaml", "clone/", "ssh-key/", "logs/0/main-0/stdout/"]
)
def test_the_other_pages_of_a_job_stay_the_owners(job, bob, path):
    assert page_client(bob).get(f"/jobs/alice~hello/{path}").status_code == 404


def test_jobs_private_hides_other_users_jobs_from_the_api(job, bob, settings):
    settings.JOBS_PRIVATE = True
    lifecycle.submit(bob, hello_job("mine"))
    client = client_for(bob)
    assert client.get(URL).status_code == 404
    assert client.get(f"{URL}/job-attempts").status_code == 404
    body = client.get("/api/v2/jobs?withTotalCount=true").json()
    assert (body["totalCount"], [j["name"] for j in body["data"]]) == (1, ["mine"])


def test_jobs_private_hides_other_users_jobs_from_the_pages(job, bob, settings):
    settings.JOBS_PRIVATE = True
    client = page_client(bob)
    assert client.get("/jobs/alice~hello/").status_code == 404
    assert "alice" not in client.get("/jobs/?user=").content.decode().split("<main", 1)[-1]
    Job.objects.filter(pk=job.pk).update(state="WAITING")
    assert "hello" not in client.get("/virtual-clusters/default/").content.decode()


def test_jobs_private_leaves_admins_and_owners_as_they_were(job, alice, admin, settings):
    settings.JOBS_PRIVATE = True
    assert client_for(alice).get(URL).status_code == 200
    assert (
        client_for(admin).get(URL).json()["taskRoles"]["main"]["taskStatuses"][0]["containerIp"]
        == "10.0.0.5"
    )


@pytest.mark.parametrize("method", ["put", "delete"])
def test_tagging_another_users_job_is_403_as_in_openpai(job, bob, method):
    response = getattr(client_for(bob), method)(f"{URL}/tag", {"value": "x"}, format="json")
    assert (response.status_code, response.json()["code"]) == (403, "ForbiddenUserError")
    assert Job.objects.get(pk=job.pk).tags == []
