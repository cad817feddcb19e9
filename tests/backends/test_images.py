"""A task in its dockerImage on the local backend (``LOCAL_IMAGES=charliecloud``,
``backends/local/images.py``), with an image built here from Debian's busybox-static and
imported with ``ch-image import``: no registry."""

from __future__ import annotations

import os
import socket
from dataclasses import replace
from pathlib import Path

import pytest

from backends.base import Observation, StorageKind, StorageMount, TaskPhase
from backends.local import LocalBackend, disk
from backends.local.launch import prepare_image
from backends.local.sandbox import SandboxConfig
from jobs import lifecycle
from jobs.exitspec import explain
from tests.support.images import IMAGE, image_storage
from tests.support.local_tasks import phase_of, shell_output, task, wait_until_ended
from tests.waiting import wait_for

__all__ = ["image_storage"]  # the module's busybox image, a fixture

PASSWORD = "registry-pa55word-xyz"  # noqa: S105 - a test's fake registry password


def ended(backend: LocalBackend, ref: str) -> Observation:
    wait_until_ended(backend, ref, timeout=60)
    return backend.observe([ref])[ref]


@pytest.fixture
def backend(tmp_path: Path, image_storage: Path) -> LocalBackend:
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "secret_key").write_text("portal-secret-key-abc")
    config = SandboxConfig(
        hidden=(str(tmp_path / "var"),), images="charliecloud", image_storage=image_storage
    )
    return LocalBackend(tmp_path / "tasks", sandbox_config=config)


def test_a_task_runs_in_its_image_and_still_cannot_read_the_portals_secret(
    backend: LocalBackend, tmp_path: Path
):
    script = (
        "cat /etc/image-name; readlink /bin/sh; cat /etc/os-release || echo no-os-release;"
        f" cat {tmp_path}/var/secret_key || echo no-secret-key; echo work=$PAI_WORK_DIR pwd=$(pwd)"
        "; echo hello > here.txt; ls /tmp | wc -l"
    )
    launch = replace(task(script), image=IMAGE)
    ref = backend.launch(launch)
    observation = ended(backend, ref)
    out = backend.read_log(ref, "stdout").decode()
    err = backend.read_log(ref, "stderr").decode()
    assert observation.phase == TaskPhase.SUCCEEDED, (out, err, observation.diagnostics)
    lines = out.splitlines()
    assert lines[:2] == ["busybox-test-image", "busybox"]
    assert "no-os-release" in lines  # the host's Debian is not in view
    assert "no-secret-key" in lines
    assert "work=/mnt/0 pwd=/mnt/0" in lines
    assert lines[-1].strip() == "0"  # a /tmp of its own, empty
    assert (backend.work_dir(ref) / "here.txt").read_text() == "hello\n"


def test_without_the_setting_the_image_is_not_used(tmp_path: Path, image_storage: Path):
    backend = LocalBackend(tmp_path / "tasks", sandbox_config=SandboxConfig())
    ref = backend.launch(replace(task("cat /etc/os-release"), image=IMAGE))
    assert ended(backend, ref).phase == TaskPhase.SUCCEEDED
    assert b"Debian" in backend.read_log(ref, "stdout")


def test_a_missing_image_fails_the_task_with_the_pull_reason_and_no_credentials_shown(
    backend: LocalBackend,
):
    launch = replace(
        task("echo never-runs"),
        image="127.0.0.1:9/portal-test/missing:1",
        pull_secret={"registry": "127.0.0.1:9", "username": "alice", "password": PASSWORD},
    )
    ref = backend.launch(launch)
    control = backend.work_dir(ref).parent
    observation = ended(backend, ref)
    assert observation.phase == TaskPhase.FAILED
    assert observation.exit_code == 254
    assert observation.diagnostics.startswith(
        "ErrImagePull: ch-image could not pull the image '127.0.0.1:9/portal-test/missing:1'"
    )
    assert explain(observation.exit_code, observation.diagnostics).phrase == "Image pull failure"
    assert backend.read_log(ref, "stdout") == b""
    assert not (control / "registry_auth").exists()  # read once, then gone
    for path in control.rglob("*"):  # the working directory's files through its mount
        if path.is_file() and path.name != disk.IMAGE:
            assert PASSWORD not in path.read_text(errors="replace"), path
    assert PASSWORD not in observation.diagnostics


def test_the_registry_credentials_wait_for_the_pull_in_a_file_only_the_portal_reads(
    backend: LocalBackend, tmp_path: Path
):
    # Where the launch writes them: the wrapper reads and deletes the file as soon as it starts.
    launch = replace(
        task("true"),
        image=IMAGE,
        pull_secret={"registry": "r", "username": "alice", "password": PASSWORD},
    )
    control = tmp_path / "control"
    control.mkdir()
    assert prepare_image(backend.sandbox, launch, control) == IMAGE
    auth = control / "registry_auth"
    assert auth.stat().st_mode & 0o777 == 0o600
    assert auth.read_text().splitlines() == ["alice", PASSWORD]


AUTH_JOB = """\
protocolVersion: 2
name: private-image
type: job
prerequisites:
  - name: img
    type: dockerimage
    uri: 127.0.0.1:9/portal-test/missing:1
    auth: {username: alice, password: registry-pa55word-xyz, registryuri: 127.0.0.1:9}
taskRoles:
  main:
    dockerImage: img
    instances: 1
    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0}
    commands: [echo hi]
"""
NOTICE = "image is not used"


@pytest.mark.django_db
def test_the_job_page_says_the_image_is_unused_only_without_the_setting(alice, web, settings):
    lifecycle.submit(alice, AUTH_JOB)
    settings.LOCAL_IMAGES = ""
    body = web.get("/jobs/alice~private-image/").content.decode()
    assert NOTICE in body
    assert PASSWORD not in body
    settings.LOCAL_IMAGES = "charliecloud"
    body = web.get("/jobs/alice~private-image/").content.decode()
    assert NOTICE not in body
    assert PASSWORD not in body


def test_ch_image_gets_the_credentials_in_its_environment_never_on_its_command_line(
    backend: LocalBackend,
):
    """A registry that never answers holds ch-image mid-pull, long enough to read its /proc."""
    registry = socket.socket()
    registry.bind(("127.0.0.1", 0))
    registry.listen(8)
    port = registry.getsockname()[1]
    image = f"127.0.0.1:{port}/portal-test/held:1"
    launch = replace(
        task("echo never-runs"),
        image=image,
        pull_secret={"registry": f"127.0.0.1:{port}", "username": "alice", "password": PASSWORD},
    )
    ref = backend.launch(launch)
    try:
        pid = wait_for(lambda: pulling(image), timeout=60)
        assert PASSWORD not in Path(f"/proc/{pid}/cmdline").read_text()
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert f"CH_IMAGE_PASSWORD={PASSWORD}".encode() in environ
        assert b"CH_IMAGE_USERNAME=alice" in environ
    finally:
        registry.close()  # the pull fails
    observation = ended(backend, ref)
    assert observation.diagnostics.startswith("ErrImagePull: ")
    assert PASSWORD not in observation.diagnostics


def pulling(image: str) -> int | None:
    """The pid of the ch-image that pulls ``image``, if one runs."""
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(arg.endswith(b"ch-image") for arg in argv[:2]) and image.encode() in argv:
            return int(proc.name)
    return None


def test_the_terminal_of_a_task_in_an_image_lands_in_the_image(backend: LocalBackend):
    ref = backend.launch(replace(task("sleep 30"), image=IMAGE))
    wait_for(lambda: phase_of(backend, ref) == TaskPhase.RUNNING)
    text = shell_output(
        backend,
        ref,
        b"cat /etc/image-name; echo pwd=$(pwd) sh=$(readlink /bin/sh) uid=$(id -u);"
        b" grep -E '^Cap(Eff|Prm)' /proc/self/status; echo end-$((6*7))\n",
        b"end-42",
    )
    assert "busybox-test-image" in text
    uid = 200_003 if os.geteuid() == 0 else os.geteuid()
    assert f"pwd=/mnt/0 sh=busybox uid={uid}" in text
    assert "CapPrm:\t0000000000000000" in text  # nothing to unmount what hides the portal
    assert "CapEff:\t0000000000000000" in text


def test_a_task_that_mounts_storage_runs_on_the_system_and_its_log_says_why(
    backend: LocalBackend, tmp_path: Path
):
    store = tmp_path / "store"
    store.mkdir(mode=0o755)
    launch = replace(
        task("cat /etc/os-release"),
        image=IMAGE,
        storages=[StorageMount(name="data", kind=StorageKind.LOCAL_DIR, path=str(store))],
    )
    ref = backend.launch(launch)
    assert ended(backend, ref).phase == TaskPhase.SUCCEEDED
    assert b"Debian" in backend.read_log(ref, "stdout")
    assert b"not in view inside an image" in backend.read_log(ref, "stderr")
