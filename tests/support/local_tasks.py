"""Tasks on the local backend for its tests: a task to launch, its phase, waiting for its end,
its ``task.json``, and what its terminal shows."""

from __future__ import annotations

import json
from pathlib import Path

from backends.base import Placement, TaskLaunch, TaskPhase
from backends.local import LocalBackend, cgroups
from backends.local.limits import HostLimits
from tests.waiting import wait_for


def task(script: str, *, gpu: int = 0, owner_is_admin: bool = False, index: int = 0) -> TaskLaunch:
    """A task of user 3's job ``job-1-a1`` (256 MB), as the sandbox tests launch it."""
    return TaskLaunch(
        attempt_key="job-1-a1",
        role="worker",
        index=index,
        retry=0,
        script=script,
        env={},
        placement=Placement(ip="127.0.0.1", ports={}),
        cpu=1,
        memory_mb=256,
        gpu=gpu,
        owner_id=3,
        owner_is_admin=owner_is_admin,
    )


def launch(
    backend: LocalBackend,
    script: str,
    *,
    key: str = "job-1-a1",
    role: str = "worker",
    index: int = 0,
    retry: int = 0,
    env: dict[str, str] | None = None,
    gpu: int = 0,
) -> str:
    """The ref of a task of no user (100 MB) launched on ``backend``."""
    return backend.launch(
        TaskLaunch(
            attempt_key=key,
            role=role,
            index=index,
            retry=retry,
            script=script,
            env=env or {},
            placement=Placement(ip="127.0.0.1", ports={}),
            cpu=1,
            memory_mb=100,
            gpu=gpu,
        )
    )


def phase_of(backend: LocalBackend, ref: str) -> TaskPhase:
    return backend.observe([ref])[ref].phase


def wait_until_ended(backend: LocalBackend, ref: str, timeout: float = 10.0) -> TaskPhase:
    def ended() -> TaskPhase | None:
        phase = phase_of(backend, ref)
        return phase if phase in (TaskPhase.SUCCEEDED, TaskPhase.FAILED) else None

    phase = wait_for(ended, timeout)
    assert phase is not None
    return phase


def record(root: Path, ref: str) -> dict[str, object]:
    """The task's ``task.json`` (pids, start times, GPUs, ports, stop request)."""
    data: dict[str, object] = json.loads((root / ref / "task.json").read_text())
    return data


def record_pid(backend: LocalBackend, ref: str) -> int:
    pid = record(backend.root, ref)["pid"]
    assert isinstance(pid, int)
    return pid


def shell_output(backend: LocalBackend, ref: str, typed: bytes, until: bytes) -> str:
    """What the terminal of the running task ``ref`` shows once ``typed`` was typed into it,
    read until ``until`` shows; then the terminal is closed and the task stopped."""
    session = backend.shell(ref)
    assert session is not None
    try:
        session.write(typed)
        seen = b""
        while until not in seen:
            chunk = session.read(10)
            assert chunk, f"the shell ended or said nothing: {seen!r}"
            seen += chunk
    finally:
        session.close()
        backend.stop([ref])
    return seen.decode(errors="replace")


def without_pids(backend: LocalBackend) -> HostLimits:
    """This host's limits as if its pids controller could not be used."""
    real = backend.hierarchy
    return HostLimits(cgroups.Hierarchy(real.version, real.root, ("memory", "cpu")), disk=True)
