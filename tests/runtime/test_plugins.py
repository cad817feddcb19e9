"""Runtime plugins in real tasks: ssh keys, storages, debug."""

from __future__ import annotations

import pytest
from django.test import Client

from clusters.models import Storage
from jobs import lifecycle
from jobs.models import Job, Task
from jobs.states import JobState
from tests.jobs.helpers import settle
from tests.runtime.jobs import one_role, page_of

pytestmark = pytest.mark.django_db(transaction=True)

SSH = """\
extras:
  com.microsoft.pai.runtimeplugin:
    - plugin: ssh
      parameters:
        jobssh: true
        userssh: {type: custom, value: "ssh-ed25519 AAAAC3NzaUSER alice@laptop"}
"""


def test_ssh_keys_and_config_are_in_place_in_each_task(alice, backend):
    text = one_role("with_ssh", ["cat $PAI_SSH_CONFIG"], SSH)
    job = settle(backend, lifecycle.submit(alice, text))
    assert job.state == JobState.SUCCEEDED
    task = Task.objects.get(attempt__job=job)
    ssh = backend.work_dir(task.backend_ref) / ".ssh"
    assert job.ssh_private_key.startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    authorized = (ssh / "authorized_keys").read_text().splitlines()
    assert authorized == [job.ssh_public_key, "ssh-ed25519 AAAAC3NzaUSER alice@laptop"]
    assert (ssh / "id_job").read_text().strip() == job.ssh_private_key.strip()
    assert (ssh / "id_job").stat().st_mode & 0o777 == 0o600
    config = (ssh / "config").read_text()
    assert "Host taskrole_1-0\n  HostName 127.0.0.1\n" in config
    assert f"Port {task.ports['ssh'][0]}" in config
    assert (ssh / "bin" / "ssh").exists()  # `ssh taskrole_1-0` uses that config


def test_only_the_owner_may_download_the_private_key(alice, bob, admin, backend):
    job = settle(backend, lifecycle.submit(alice, one_role("key", ["true"], SSH)))
    url = f"/jobs/alice~{job.name}/ssh-key/"
    owner = Client()
    owner.force_login(alice)
    response = owner.get(url)
    assert response.status_code == 200
    assert response.content.decode() == Job.objects.get(id=job.id).ssh_private_key
    for other in (bob, admin):
        client = Client()
        client.force_login(other)
        assert client.get(url).status_code == 404
    assert "Download the private key" in page_of(alice, job)
    assert "PRIVATE KEY" not in page_of(admin, job)


def storage_job(name: str, storage: str) -> str:
    extra = f"""\
extras:
  com.microsoft.pai.runtimeplugin:
    - plugin: teamwise_storage
      parameters: {{storageConfigNames: [{storage}]}}
"""
    return one_role(
        name, [f"cat $PAI_WORK_DIR/mnt/{storage}/hello.txt", f"echo $PAI_STORAGE_{storage}"], extra
    )


def test_a_storage_the_user_may_use_is_mounted(alice, backend, tmp_path):
    (tmp_path / "share").mkdir()
    (tmp_path / "share" / "hello.txt").write_text("shared data\n")
    store = Storage.objects.create(name="share", path=str(tmp_path / "share"))
    store.users.add(alice)
    job = settle(backend, lifecycle.submit(alice, storage_job("mounts", "share")))
    assert job.state == JobState.SUCCEEDED
    task = Task.objects.get(attempt__job=job)
    out = backend.read_log(task.backend_ref, "stdout").decode().splitlines()
    assert out == ["shared data", str(tmp_path / "share")]


def test_a_storage_the_user_may_not_use_is_refused_at_submit(alice, bob, tmp_path):
    Storage.objects.create(name="private", path=str(tmp_path)).users.add(bob)
    with pytest.raises(lifecycle.SubmitError) as refused:
        lifecycle.submit(alice, storage_job("refused", "private"))
    assert refused.value.status == 403
    assert "'private'" in str(refused.value)
    with pytest.raises(lifecycle.SubmitError) as unknown:
        lifecycle.submit(alice, storage_job("unknown", "nowhere"))
    assert unknown.value.status == 400
    assert "'nowhere'" in str(unknown.value)
    assert not Job.objects.exists()


def test_a_debug_job_page_says_failed_tasks_are_kept(alice, backend):
    extra = "extras:\n  jobEnvs: {isDebug: true}\n"
    job = settle(backend, lifecycle.submit(alice, one_role("debugging", ["exit 1"], extra)))
    task = Task.objects.get(attempt__job=job)
    assert (backend.work_dir(task.backend_ref) / ".keep_until").exists()
    assert "the working directory of a failed task is kept for 24 hours" in page_of(alice, job)
