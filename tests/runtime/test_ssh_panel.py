"""The SSH panel and ``/ssh`` show a command only for a task whose sshd started (its bootstrap
says so in its log); else they say why nobody can ssh in and how to get sshd."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from backends.base import Placement, TaskLaunch, TaskPhase
from backends.local import LocalBackend
from jobs import lifecycle
from jobs.models import Job, Task
from jobs.sshinfo import sshd_state
from jobs.states import TaskState
from tests.jobs.helpers import reconcile_until, settle
from tests.runtime.jobs import one_role
from tests.runtime.test_ssh_between_tasks import SSH_PLUGIN, WAIT_FOR_DONE, need_sshd
from tests.waiting import wait_for

NO_SSHD = "Nobody can ssh into this task"


def running(alice, backend, name: str) -> Job:
    job = lifecycle.submit(alice, one_role(name, [WAIT_FOR_DONE], SSH_PLUGIN))
    reconcile_until(
        backend, lambda: Task.objects.filter(attempt__job=job, state=TaskState.RUNNING).exists()
    )
    return job


def ssh_api(alice, job: Job) -> dict:
    client = APIClient()
    client.force_authenticate(alice)
    response = client.get(f"/api/v2/jobs/alice~{job.name}/ssh")
    assert response.status_code == 200, response.content
    return response.json()


def page_when(web, job: Job, text: str) -> str:
    def page() -> str:
        body = web.get(f"/jobs/alice~{job.name}/").content.decode()
        return body if text in body else ""

    return wait_for(page)


def finish(alice, backend, job: Job) -> None:
    task = Task.objects.get(attempt__job=job)
    (backend.work_dir(task.backend_ref) / "done").touch()
    lifecycle.stop(Job.objects.get(id=job.id), alice)


@pytest.mark.django_db(transaction=True)
def test_a_task_whose_sshd_listens_shows_its_ssh_command(alice, backend, web):
    need_sshd()
    job = running(alice, backend, "sshd_on")
    task = Task.objects.get(attempt__job=job)
    port = task.ports["ssh"][0]
    page = page_when(web, job, 'class="ssh-command"')
    assert f"ssh -i sshd_on.id_ed25519 -p {port} " in page
    assert NO_SSHD not in page
    row = ssh_api(alice, job)["tasks"][0]
    assert (row["sshd"], row["sshdNote"]) == ("listening", "")
    assert row["sshCommand"].startswith(f"ssh -i sshd_on.id_ed25519 -p {port} ")
    finish(alice, backend, job)
    settle(backend, job)
    row = ssh_api(alice, job)["tasks"][0]
    assert (row["sshd"], row["sshCommand"]) == ("not running", None)


@pytest.mark.django_db(transaction=True)
def test_a_task_whose_sshd_did_not_start_says_nobody_can_ssh_in(alice, backend, web, monkeypatch):
    """The task's ssh port is taken (held here), so the real sshd cannot listen on it."""
    need_sshd()
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    real_place = backend.place

    def place_on_a_taken_port(key, shapes):
        return [Placement(p.ip, {**p.ports, "ssh": [port]}) for p in real_place(key, shapes)]

    monkeypatch.setattr(backend, "place", place_on_a_taken_port)
    try:
        job = running(alice, backend, "sshd_off")
        page = page_when(web, job, NO_SSHD)
    finally:
        taken.close()
    task = Task.objects.get(attempt__job=job)
    assert (
        "[portal] ssh: sshd did not start" in backend.read_log(task.backend_ref, "stderr").decode()
    )
    assert f"{NO_SSHD}: sshd did not start." in page
    assert 'class="ssh-command"' not in page
    assert "openssh-server" in page and "jobSSH" in page
    body = ssh_api(alice, job)
    row = body["tasks"][0]
    assert (row["sshd"], row["sshCommand"], row["sshdNote"]) == (
        "not started",
        None,
        "sshd did not start",
    )
    assert "openssh-server" in body["howToGetSshd"]
    finish(alice, backend, job)


def launched(backend: LocalBackend, key: str, script: str) -> str:
    ref = backend.launch(
        TaskLaunch(
            attempt_key=key, role="worker", index=0, retry=0, script=script, env={},
            placement=Placement("127.0.0.1", {}), cpu=1, memory_mb=64, gpu=0,
        )
    )  # fmt: skip
    wait_for(lambda: backend.observe([ref])[ref].phase == TaskPhase.SUCCEEDED)
    return ref


def test_the_state_is_what_the_bootstrap_said_and_nothing_yet_is_starting(tmp_path: Path):
    backend = LocalBackend(tmp_path)
    said = "echo '[portal] ssh: no sshd in the image: not started, nobody can ssh in' >&2\n"
    no_sshd = launched(backend, "job1-a0", said)
    assert sshd_state(backend, no_sshd).why == "no sshd in the image"
    port = "echo '[portal] ssh: sshd not started: the task role has no ssh port' >&2\n"
    no_port = launched(backend, "job2-a0", port)
    assert sshd_state(backend, no_port).why.startswith("sshd not started: the task role has no")
    quiet = launched(backend, "job3-a0", "echo '[portal] barrier passed' >&2\n")
    assert sshd_state(backend, quiet).status == "starting"
    listens = "echo '[portal] ssh: sshd (pid 42) listens on port 2222, log in x' >&2\n"
    assert sshd_state(backend, launched(backend, "job4-a0", listens)).status == "listening"


@pytest.mark.django_db(transaction=True)
def test_on_the_local_backend_without_images_the_panel_names_the_host_not_an_image(
    alice, backend, web, monkeypatch, settings
):
    """Tasks use the host's programs there: "run it in an image with sshd" was no help when the
    host had no sshd (issue 28). What the bootstrap said is read as it is on every backend."""
    from jobs import sshinfo

    settings.LOCAL_IMAGES = ""
    monkeypatch.setattr(
        sshinfo, "_said", lambda *_: sshinfo.SshdState("not started", "no sshd in the image")
    )
    sshinfo._known.clear()
    job = running(alice, backend, "no_host_sshd")
    page = page_when(web, job, NO_SSHD)
    assert f"{NO_SSHD}: no sshd on the machine the task runs on." in page
    assert "the machine the portal runs its tasks on needs sshd" in page
    assert "an image with sshd" not in page
    body = ssh_api(alice, job)
    assert body["tasks"][0]["sshdNote"] == "no sshd on the machine the task runs on"
    assert (
        "openssh-server" in body["howToGetSshd"] and "not their dockerImage" in body["howToGetSshd"]
    )
    settings.LOCAL_IMAGES = "charliecloud"  # tasks in their images: the image is the answer
    assert "run it in an image with sshd" in ssh_api(alice, job)["howToGetSshd"]
    finish(alice, backend, job)


def test_make_run_says_when_the_host_has_no_sshd(monkeypatch, settings, tmp_path: Path):
    from clusters import registry

    backend = LocalBackend(tmp_path)
    settings.LOCAL_IMAGES = ""
    monkeypatch.setattr(registry.shutil, "which", lambda _: None)
    monkeypatch.setattr(registry, "SBIN_SSHD", tmp_path / "no-sshd-here")
    said = registry.host_sshd_missing(backend)
    assert said is not None and "no sshd on this host" in said and "openssh-server" in said
    settings.LOCAL_IMAGES = "charliecloud"
    assert registry.host_sshd_missing(backend) is None
    settings.LOCAL_IMAGES = ""
    monkeypatch.setattr(registry, "SBIN_SSHD", Path("/bin/sh"))  # any file there
    assert registry.host_sshd_missing(backend) is None
