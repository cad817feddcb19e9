"""Shared fixtures: personas (alice owns jobs, bob is another user, admin) and a real backend."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.contrib.auth.models import User
from django.test import Client

from backends.local import LocalBackend, disk
from clusters import registry
from jobs.wakeup import LAST_RUN_KEY

TEST_SLOT = int(os.environ.get("TEST_SLOT", "0"))


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """pytest-django's, with every session on the test database ended before it is dropped:
    the pool keeps a connection open (``min_size``), and a thread a test started may end
    holding one; PostgreSQL refuses to drop a database someone is connected to, so it was left
    behind, with a warning, at the end of every run."""
    from django.db import connections

    yield
    default = connections["default"]
    if default.vendor != "postgresql":
        return
    name = default.settings_dict["NAME"]
    for connection in connections.all():
        connection.close()
        if getattr(connection, "pool", None) is not None:
            connection.close_pool()
    with django_db_blocker.unblock(), default._nodb_cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid()",
            [name],
        )


@pytest.fixture(autouse=True, scope="session")
def _short_lived_connections() -> None:
    """Connections opened in other threads (consumers, passes) close after each use, so that
    the test database can be dropped at the end."""
    from django.db import connections

    connections.settings["default"]["CONN_MAX_AGE"] = 0
    connections["default"].settings_dict["CONN_MAX_AGE"] = 0


@pytest.fixture(autouse=True)
def _test_settings(settings, tmp_path: Path) -> Iterator[None]:
    # The real channel layer (channels-redis) and cache (Redis) of settings.py, on the test
    # Redis database (REDIS_URL), under keys of this test only: groups, channels and
    # rate-limit counters start empty in every test, and nothing is flushed.
    unique, redis_url = f"test-{uuid.uuid4().hex[:12]}:", settings.REDIS_URL
    layer = settings.CHANNEL_LAYERS["default"]
    settings.CHANNEL_LAYERS = {
        "default": {**layer, "CONFIG": {**layer["CONFIG"], "prefix": f"{unique}asgi"}}
    }
    settings.CACHES = {"default": {**settings.CACHES["default"], "KEY_PREFIX": unique}}
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.LOCAL_TASK_ROOT = tmp_path / "tasks"
    # What tasks and tests both see: the tasks' own sandboxes hide the rest of tmp_path.
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)  # the tasks' uids (the portal is root here) write in it too
    settings.LOCAL_SANDBOX_SHARED = [str(shared)]
    settings.LOCAL_STOP_GRACE_SECONDS = 2.0
    # The task firewall's table of the tests' own, on task uids of their own: a portal running
    # tasks on this machine (uids from 200000) keeps its table, and neither table refuses the
    # other's tasks (a packet passes only if every table on the hook lets it through).
    # TEST_SLOT (0-9) gives a test run beside another on this machine a table and uids of its own.
    settings.LOCAL_FIREWALL_TABLE = f"portal_tasks_tests{TEST_SLOT or ''}"
    settings.LOCAL_TASK_UID_BASE = 1_300_000 + TEST_SLOT * 100_000
    # Each persona's password would otherwise cost a million PBKDF2 rounds.
    settings.PASSWORD_HASHERS = ["tests.hashers.QuickPBKDF2PasswordHasher"]
    # A healthy portal, where beat has just run a pass: pages show no "scheduler has not run"
    # banner unless a test makes that so (tests/portal/test_scheduler_banner.py).
    with redis.Redis.from_url(redis_url) as client:
        client.set(LAST_RUN_KEY, time.time())
    yield
    with redis.Redis.from_url(redis_url) as client:
        for key in client.scan_iter(match=f"{unique}*", count=1000):
            client.delete(key)


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    """A directory every task sees read-write at the same path (LOCAL_SANDBOX_SHARED)."""
    return tmp_path / "shared"


@pytest.fixture(autouse=True)
def _fresh_backend() -> Iterator[None]:
    """The backend is built from settings once per process; once per test here."""
    registry.get_backend.cache_clear()
    yield
    registry.get_backend.cache_clear()


@pytest.fixture(autouse=True)
def _roomy_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """Admission is bounded by the cluster's capacity, read from the backend's nodes (here,
    this machine). Tests see at least 64 CPUs and 256 GB whatever machine runs them, so that
    none depends on its number of cores; GPUs stay as the backend reports them."""
    from dataclasses import replace

    from clusters import capacity

    real = capacity.backend_nodes

    def roomy(backend):  # type: ignore[no-untyped-def]
        return {
            name: replace(cap, cpu=max(cap.cpu, 64), memory_mb=max(cap.memory_mb, 256_000))
            for name, cap in real(backend).items()
        }

    monkeypatch.setattr(capacity, "backend_nodes", roomy)


@pytest.fixture(autouse=True)
def _local_backends_released(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every local backend a test builds leaves nothing on the machine: its tasks killed, then
    their cgroups (/sys/fs/cgroup/*/portal-tasks) and gates (/run/portal-tasks) removed."""
    built: list[LocalBackend] = []
    build = LocalBackend.__init__

    def register(self: LocalBackend, *args: object, **kwargs: object) -> None:
        build(self, *args, **kwargs)  # type: ignore[arg-type]
        built.append(self)

    monkeypatch.setattr(LocalBackend, "__init__", register)
    yield
    for local in built:
        release(local)


def release(local: LocalBackend) -> None:
    """Kill what still runs under ``local.root``, then remove its tasks and what they held."""
    if not local.root.is_dir():
        return
    for kept in local.root.glob("*/*/work/.keep_until"):  # a debug task's: not kept past the test
        kept.unlink(missing_ok=True)
    local.cleanup([])  # kills the running tasks (SIGKILL), removes the ended ones
    deadline = time.monotonic() + 10
    while any(local._live_records()) and time.monotonic() < deadline:
        time.sleep(0.05)
    local.cleanup([])
    disk.release_all(local.root)  # a task file system cleanup could not remove


@pytest.fixture
def backend(settings) -> Iterator[LocalBackend]:
    local = registry.get_backend()
    assert isinstance(local, LocalBackend)
    yield local
    # Leave no process behind, nor the tasks' cgroups and gates.
    refs = [str(p.relative_to(local.root)) for p in Path(local.root).glob("*/*") if p.is_dir()]
    local.stop(refs)
    release(local)


@pytest.fixture(autouse=True)
def _no_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests drive reconcile passes themselves; enqueueing is a no-op here."""
    from jobs import wakeup

    monkeypatch.setattr(wakeup, "send_reconcile", lambda countdown=None: None)


def make_user(username: str, **extra: object) -> User:
    return User.objects.create_user(username, password=f"{username}-secret-pw", **extra)


@pytest.fixture
def alice(db) -> User:
    return make_user("alice")


@pytest.fixture
def bob(db) -> User:
    return make_user("bob")


@pytest.fixture
def web(alice) -> Client:
    """A browser-like client logged in as alice."""
    client = Client()
    client.force_login(alice)
    return client


@pytest.fixture
def admin(db) -> User:
    return make_user("admin", is_staff=True, is_superuser=True)


@pytest.fixture
def async_client_for():
    """A logged-in test client whose session cookie a WebSocket can carry."""
    from asgiref.sync import sync_to_async
    from django.test import Client

    async def make(user: User) -> Client:
        client = Client()
        await sync_to_async(client.force_login)(user)
        return client

    return make


@pytest.fixture
def two_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A fake ``nvidia-smi`` on PATH that reports two GPUs, as its ``--query-gpu=index,name,
    uuid,pci.bus_id`` writes them (the lines, returned). The driver's minor numbers are not
    its indices on every machine: tests/backends/test_gpus.py fakes the driver's files."""
    lines = [
        "0, Tesla T4, GPU-0a1b2c3d-0000-4000-8000-000000000001, 00000000:3B:00.0",
        "1, Tesla T4, GPU-0a1b2c3d-0000-4000-8000-000000000002, 00000000:AF:00.0",
    ]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "nvidia-smi"
    fake.write_text("#!/bin/sh\ncat <<'EOF'\n" + "\n".join(lines) + "\nEOF\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return lines
