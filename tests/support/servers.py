"""Real servers for the tests: a private redis-server that a test may stop and start (the
shared one on 6379 is never touched), and the portal's ASGI app under uvicorn, as ``runportal``
serves it, in a subprocess on the test database."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import redis
from django.conf import settings

from portal.management.commands.runportal import portal_programs, web_command

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(f"{what} exited with {process.returncode}") from None
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not listen on {port}") from None
            time.sleep(0.1)


class RedisServer:
    """A redis-server of the test's own on a free loopback port, without persistence."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1"]
            + ["--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
        )
        wait_for_port(self.port, self.process, "redis-server")
        redis.Redis.from_url(self.url).ping()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        self.process = None


def database_url() -> str:
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@contextmanager
def web_server(log_path: Path | None = None, **env: str) -> Iterator[str]:
    """The portal's web server (one uvicorn process) on the test database; its base URL. Its
    output goes to ``log_path`` (else the test's own); ``env`` adds to (or overrides) the
    environment it gets."""
    port = free_port()
    full_env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "SECRET_KEY": settings.SECRET_KEY,  # sessions made by the test are valid there
        "LOCAL_TASK_ROOT": str(settings.LOCAL_TASK_ROOT),
        "LOCAL_SANDBOX_SHARED": ",".join(settings.LOCAL_SANDBOX_SHARED),  # the tests' and tasks'
        "CELERY_TASK_ALWAYS_EAGER": "False",
        **env,
    }
    with open(log_path, "wb") if log_path else nullcontext(None) as log:
        server = subprocess.Popen(
            web_command("127.0.0.1", port, 1),
            env=full_env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT if log else None,
        )
        try:
            wait_for_port(port, server, "uvicorn")
            yield f"http://127.0.0.1:{port}"
        finally:
            server.terminate()
            server.wait(15)


@contextmanager
def portal_process(args: list[str], **env: str) -> Iterator[subprocess.Popen[bytes]]:
    """A process of the portal (``args`` after the interpreter) on the test database, Redis
    database and task root; stopped (its whole session) at the end."""
    full_env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "SECRET_KEY": settings.SECRET_KEY,
        "LOCAL_TASK_ROOT": str(settings.LOCAL_TASK_ROOT),
        # The tests' own firewall table and task uids (tests/conftest.py): not those of a
        # portal of this machine's, whose table the tests' cleanup would never remove.
        "LOCAL_FIREWALL_TABLE": settings.LOCAL_FIREWALL_TABLE,
        "LOCAL_TASK_UID_BASE": str(settings.LOCAL_TASK_UID_BASE),
        "CELERY_TASK_ALWAYS_EAGER": "False",
        **env,
    }
    process = subprocess.Popen(
        [sys.executable, *args], env=full_env, cwd=ROOT, start_new_session=True
    )
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@contextmanager
def reconcile_worker_and_listener(**worker_env: str) -> Iterator[None]:
    """What ``runportal`` runs to apply a task's end, without beat: its Celery worker (with
    ``worker_env`` added to its environment) and the listener of ended tasks (``manage.py
    watchcluster``)."""
    worker = portal_programs("127.0.0.1", 0, 1)["worker"][1:]  # after the interpreter
    with portal_process(worker, **worker_env), portal_process(["manage.py", "watchcluster"]):
        yield


def connects(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a TCP connection to ``host:port`` from this process is accepted."""
    try:
        socket.create_connection((host, port), timeout=1).close()
    except OSError:
        return False
    return True
