"""Secret task files outside the script, storages the local backend refuses, and cleanup."""

from __future__ import annotations

import os
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from backends.base import Placement, StorageMount, TaskLaunch, TaskPhase
from backends.local import LocalBackend, LocalBackendError
from clusters.models import Storage
from jobs import lifecycle
from jobs.lifecycle import cleanup
from jobs.models import JobAttempt, Task
from jobs.runtime.script import files_setup
from jobs.states import JobState, TaskState
from tests.jobs.helpers import settle
from tests.runtime.jobs import one_role
from tests.runtime.test_plugins import SSH
from tests.waiting import wait_for


def launch(backend: LocalBackend, key: str, script: str = "exit 0\n", **extra: object) -> str:
    return backend.launch(
        TaskLaunch(
            attempt_key=key, role="worker", index=0, retry=0, script=script, env={},
            placement=Placement("127.0.0.1", {}), cpu=1, memory_mb=64, gpu=0,
            **extra,  # type: ignore[arg-type]
        )
    )  # fmt: skip


def ended(backend: LocalBackend, ref: str) -> None:
    wait_for(lambda: backend.observe([ref])[ref].phase in (TaskPhase.SUCCEEDED, TaskPhase.FAILED))


def test_the_local_backend_writes_task_files_owner_only_before_the_start(tmp_path: Path):
    backend = LocalBackend(tmp_path)
    ref = launch(backend, "job1-a0", "cat .ssh/id_job\n", files={".ssh/id_job": "KEY\n"})
    ended(backend, ref)
    assert backend.read_log(ref, "stdout") == b"KEY\n"
    key = backend.work_dir(ref) / ".ssh" / "id_job"
    assert key.stat().st_mode & 0o777 == 0o600
    assert key.parent.stat().st_mode & 0o777 == 0o700
    with pytest.raises(ValueError, match="relative file path"):
        launch(backend, "job2-a0", files={"../escape": "x"})


def test_the_script_copies_mounted_files_into_the_work_dir(tmp_path: Path):
    """What a pod does: files mounted read-only at $PAI_FILES_DIR, copied owner-only."""
    mounted, work = tmp_path / "pai" / "files", tmp_path / "work"
    (mounted / ".ssh").mkdir(parents=True)
    (mounted / ".ssh" / "id_job").write_text("KEY\n")
    work.mkdir()
    script = 'portal_say() { echo "$*" >&2; }\n' + files_setup({".ssh/id_job": "KEY\n"})
    env = {"PATH": os.environ["PATH"], "PAI_FILES_DIR": str(mounted), "PAI_WORK_DIR": str(work)}
    subprocess.run(["/bin/sh", "-c", script], env=env, check=True)
    assert (work / ".ssh" / "id_job").read_text() == "KEY\n"
    assert (work / ".ssh" / "id_job").stat().st_mode & 0o777 == 0o600
    assert (work / ".ssh").stat().st_mode & 0o777 == 0o700
    (mounted / ".ssh" / "id_job").unlink()
    failed = subprocess.run(["/bin/sh", "-c", script], env=env, capture_output=True, text=True)
    assert failed.returncode == 203
    assert "could not place the task file .ssh/id_job" in failed.stderr


def test_the_local_backend_refuses_pvc_and_nfs_storages_with_a_reason(tmp_path: Path):
    backend = LocalBackend(tmp_path)
    with pytest.raises(LocalBackendError, match="'data' is a pvc storage; the local backend"):
        launch(backend, "job1-a0", storages=[StorageMount("data", "pvc", claim_name="c")])
    assert not (tmp_path / "job1-a0").exists()


@pytest.mark.django_db(transaction=True)
def test_the_ssh_private_key_is_not_in_the_script(alice, backend):
    job = settle(backend, lifecycle.submit(alice, one_role("keyfile", ["true"], SSH)))
    task = Task.objects.get(attempt__job=job)
    workdir = Path(backend.root) / task.backend_ref
    assert "PRIVATE KEY" not in (workdir / "bootstrap.sh").read_text()
    assert (workdir / "work" / ".ssh" / "id_job").read_text().strip() == job.ssh_private_key.strip()


@pytest.mark.django_db(transaction=True)
def test_an_nfs_storage_fails_a_local_task_with_a_reason(alice, backend):
    Storage.objects.create(name="home", kind="nfs", server="nfs", path="/x", open_to_all=True)
    extra = (
        "extras:\n  com.microsoft.pai.runtimeplugin:\n    - plugin: teamwise_storage\n"
        "      parameters: {storageConfigNames: [home]}\n"
    )
    job = settle(backend, lifecycle.submit(alice, one_role("nfs_here", ["true"], extra)))
    task = Task.objects.get(attempt__job=job)
    assert (job.state, task.state) == (JobState.FAILED, TaskState.FAILED)
    assert "'home' is a nfs storage; the local backend can only mount local-dir" in (
        task.diagnostics
    )


def test_local_cleanup_removes_attempts_not_kept_but_honours_keep_until(tmp_path: Path):
    backend = LocalBackend(tmp_path / "tasks", stop_grace_seconds=1)
    kept = launch(backend, "job1-a0")
    old = launch(backend, "job2-a0")
    debug = launch(backend, "job3-a0", "exit 1\n")
    expired = launch(backend, "job4-a0", "exit 1\n")
    orphan = launch(backend, "job5-a0", "sleep 60\n")
    for ref in (kept, old, debug, expired):
        ended(backend, ref)
    (backend.work_dir(debug) / ".keep_until").write_text(f"{int(time.time()) + 3600}\n")
    (backend.work_dir(expired) / ".keep_until").write_text(f"{int(time.time()) - 1}\n")
    assert backend.cleanup({"job1-a0"}) == ["job2-a0", "job4-a0", "job5-a0"]
    assert (backend.root / kept).is_dir() and (backend.root / debug).is_dir()
    assert not (backend.root / "job2-a0").exists() and not (backend.root / "job4-a0").exists()
    # A task still running in an unknown attempt is killed now, its directory removed next time.
    wait_for(lambda: backend.observe([orphan])[orphan].phase == TaskPhase.FAILED)
    backend.cleanup({"job1-a0"})
    assert not (backend.root / "job5-a0").exists()
    assert (backend.root / debug).is_dir()


@pytest.mark.django_db(transaction=True)
def test_the_reconcile_pass_cleans_up_local_attempts_finished_long_ago(alice, backend, settings):
    settings.LOCAL_KEEP_FINISHED_HOURS = 24
    recent = settle(backend, lifecycle.submit(alice, one_role("recent", ["true"])))
    old = settle(backend, lifecycle.submit(alice, one_role("old", ["true"])))
    launch(backend, "job999999-a0")  # left by a job the portal does not know
    JobAttempt.objects.filter(job=old).update(completed_at=timezone.now() - timedelta(hours=25))
    root = Path(backend.root)
    old_key = JobAttempt.objects.get(job=old).key
    assert cleanup.cleanup(backend, force=True) == sorted([old_key, "job999999-a0"])
    assert (root / JobAttempt.objects.get(job=recent).key).is_dir()
    assert not (root / old_key).exists()
