"""``jobs.sshinfo`` and ``GET /api/v2/jobs/<user>~<job>/ssh``: it works, for owner and admins."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from jobs.models import Task
from jobs.plugins.ssh.keys import job_keys
from jobs.sshinfo import fingerprint, ssh_info, ssh_user
from tests.api.helpers import client_for, job_with_tasks

pytestmark = pytest.mark.django_db

URL = "/api/v2/jobs/alice~hello/ssh"


def test_the_fingerprint_is_what_ssh_keygen_prints(alice, tmp_path: Path):
    job = job_with_tasks(alice)
    _, public = job_keys(job)
    key = tmp_path / "key.pub"
    key.write_text(public + "\n")
    printed = subprocess.run(
        ["ssh-keygen", "-l", "-E", "sha256", "-f", str(key)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[1]
    assert fingerprint(public) == printed


def test_a_key_that_is_not_one_has_no_fingerprint():
    assert fingerprint("") is None
    assert fingerprint("ssh-ed25519 not*base64") is None


def test_each_task_gets_its_ip_port_and_command(alice):
    job = job_with_tasks(alice)
    job_keys(job)
    info = ssh_info(job, Task.objects.filter(attempt__job=job))
    task = info["tasks"][0]
    assert (task["containerIp"], task["containerSshPort"]) == ("10.0.0.5", 22022)
    assert task["sshCommand"] == f"ssh -i hello.id_ed25519 -p 22022 {ssh_user(alice.id)}@10.0.0.5"
    assert info["keyFingerprint"].startswith("SHA256:")


def test_a_task_without_an_ssh_port_has_no_command(alice):
    job = job_with_tasks(alice, ssh_port=None)
    task = ssh_info(job, Task.objects.filter(attempt__job=job))["tasks"][0]
    assert task["containerSshPort"] is None and task["sshCommand"] is None


def test_the_owner_reads_the_ssh_details(alice):
    job_keys(job_with_tasks(alice))
    response = client_for(alice).get(URL)
    assert response.status_code == 200
    assert response.json()["tasks"][0]["containerSshPort"] == 22022
    assert "PRIVATE" not in response.content.decode()


def test_an_admin_reads_them_too(alice, admin):
    job_with_tasks(alice)
    assert client_for(admin).get(URL).status_code == 200


def test_another_user_gets_404(alice, bob):
    job_with_tasks(alice)
    response = client_for(bob).get(URL)
    assert response.status_code == 404
    assert response.json()["code"] == "NoJobError"


def test_anonymous_gets_401(alice):
    job_with_tasks(alice)
    assert client_for(None).get(URL).status_code == 401
