"""``manage.py runportal``: the whole portal in one command on one port (what ``make run`` calls).

Uses the Redis at REDIS_URL when it is set and answers, else starts a private one with a password
on a free loopback port; runs the system checks (which refuse a Redis or database local tasks
could use without a password), migrates, creates the first admin (printing its password), then
runs the processes of
``portal_processes`` until Ctrl-C or SIGTERM, which stop them all. One that dies on its own (a
crash, the OOM killer, a ``kill``) is started again after a backoff, and the log says so.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from clusters.backends.base import SupportsLimits
from clusters.backends.local import LocalBackend
from clusters.registry import get_backend, host_sshd_missing
from portal.apps import stored_secret_key
from portal.checks import redis_answers

FIRST_BACKOFF_SECONDS = 1.0  # a crashed process starts again after this, doubling while it
MAX_BACKOFF_SECONDS = 30.0  # keeps crashing (it lived less than HEALTHY_SECONDS), up to this
HEALTHY_SECONDS = 30.0
STOP_GRACE_SECONDS = 15.0
REDIS_PASSWORD_FILE = "redis_password"  # noqa: S105 - a file name, in var/ by the secret key


@dataclass
class Child:
    """One process of the portal: its name, its command, and the file descriptors it inherits
    (the web servers' listening socket)."""

    name: str
    command: list[str]
    pass_fds: tuple[int, ...] = ()
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    backoff: float = FIRST_BACKOFF_SECONDS
    restart_at: float = 0.0  # when ``process`` is None: when to start it again
    quiet: bool = False  # its output is dropped (the private Redis)

    def run(self) -> subprocess.Popen[bytes]:
        # A session of its own: a crashed worker's pool processes are killed with it, and only
        # runportal hears Ctrl-C, so that it stops the children in order.
        self.process = subprocess.Popen(
            self.command,
            pass_fds=self.pass_fds,
            start_new_session=True,
            stdout=subprocess.DEVNULL if self.quiet else None,
            preexec_fn=stop_with(os.getpid()) if sys.platform == "linux" else None,
        )
        self.started_at = time.monotonic()
        return self.process


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def stop_with(parent: int) -> Callable[[], None]:
    """What a child runs before its command: ask Linux for a SIGTERM when runportal dies, even
    by SIGKILL (or the OOM killer), so that no server is left holding the port, the private
    Redis or the database. Runs between fork and exec: ctypes only, nothing that locks."""

    def ask() -> None:
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # runportal died before the request took hold
            os._exit(1)

    return ask


def portal_processes(web_socket: socket.socket, web_processes: int) -> list[Child]:
    """What runs besides Redis: daphne processes sharing the one listening socket (Django runs
    sync views on one thread per process, so one per core), a Celery worker, Celery beat, and the
    watcher that wakes the reconcile loop when a task ends or a pod changes (``watchcluster``)."""
    python = sys.executable
    fd = web_socket.fileno()
    celery = [python, "-m", "celery", "-A", "portal"]
    schedule = str(settings.VAR_DIR / "celerybeat-schedule")
    manage = str(settings.BASE_DIR / "manage.py")
    return [
        *(
            Child(f"web-{n}", daphne_command(fd), pass_fds=(fd,))
            for n in range(1, web_processes + 1)
        ),
        Child("worker", [*celery, "worker", "-l", "info", "--concurrency", "2"]),
        Child("beat", [*celery, "beat", "-l", "warning", "--schedule", schedule]),
        Child("watcher", [python, manage, "watchcluster"]),
    ]


def daphne_command(fd: int) -> list[str]:
    return [sys.executable, "-m", "daphne", "--fd", str(fd), "portal.asgi:application"]


def metrics_files(folder: Path) -> None:
    """Where the web processes keep their API latency counts for GET /metrics (portal.metrics:
    prometheus_client's multiprocess mode), emptied at each start as its docs ask."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(folder)  # the children inherit it


def listen(host: str, port: int) -> socket.socket:
    """The web servers' one listening socket, inherited by each (``daphne --fd``)."""
    sock = socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else -1)
    sock.set_inheritable(True)
    return sock


def web_processes() -> int:
    return max(1, int(os.environ.get("WEB_PROCESSES") or os.cpu_count() or 1))


def private_redis_config(var_dir: Path) -> Path:
    """The private Redis's configuration: a password of its own (made once, in ``var/`` like the
    secret key), so that a job on this machine, which reaches the loopback, cannot use it. In a
    file readable by the portal's user only, not on the command line any process can read."""
    password = stored_secret_key(var_dir / REDIS_PASSWORD_FILE)
    path = var_dir / "redis.conf"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as conf:
        conf.write(
            f"# Written by runportal: the private Redis's password.\nrequirepass {password}\n"
        )
    os.chmod(path, 0o600)
    return path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def kill_group(process: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


def supervise(children: list[Child], stop: threading.Event, say: Callable[[str], None]) -> None:
    """Start ``children`` (those not running yet), start again any that exits, after a backoff
    that doubles while it keeps dying young; when ``stop`` is set, stop them all."""
    while not stop.is_set():
        now = time.monotonic()
        for child in children:
            if child.process is None and now >= child.restart_at:
                say(f"{child.name}: started, pid {child.run().pid}")
            if child.process is None or (code := child.process.poll()) is None:
                continue
            kill_group(child.process, signal.SIGKILL)  # what it left behind (pool processes)
            lived = now - child.started_at
            if lived >= HEALTHY_SECONDS:
                child.backoff = FIRST_BACKOFF_SECONDS
            say(
                f"{child.name}: pid {child.process.pid} exited with code {code} after "
                f"{lived:.0f} s; starting it again in {child.backoff:.0f} s"
            )
            child.process, child.restart_at = None, now + child.backoff
            child.backoff = min(child.backoff * 2, MAX_BACKOFF_SECONDS)
        stop.wait(0.3)
    stop_all(children)


def stop_all(children: list[Child]) -> None:
    """SIGTERM to each (the last started first), SIGKILL to those still up after the grace
    period, and to whatever each left in its session."""
    running = [c.process for c in reversed(children) if c.process is not None]
    for process in running:
        process.terminate()
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    for process in running:
        try:
            process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        kill_group(process, signal.SIGKILL)


class Command(BaseCommand):
    help = "Run the web server, a Celery worker and Celery beat together (Ctrl-C stops all)."
    # Run in handle once ensure_redis has chosen the Redis: the check of one tasks could use
    # (portal.E006) is about that one, not the default URL a private Redis replaces.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))

    def handle(self, *args: Any, **options: Any) -> None:
        children: list[Child] = []
        settings.VAR_DIR.mkdir(parents=True, exist_ok=True)  # Redis's password, SQLite, beat
        private_redis = self.ensure_redis()
        if private_redis is not None:
            children.append(private_redis)
        try:
            self.check(display_num_errors=True)
            call_command("migrate", interactive=False, verbosity=0)
            call_command("ensure_admin")
        except BaseException:  # Ctrl-C, a failed check or migration: the private Redis stops too
            stop_all(children)
            raise
        host, port = options["host"], options["port"]
        os.environ["PORT"] = str(port)  # the port tasks may reach (the backend's firewall)
        processes = web_processes()
        metrics_files(settings.VAR_DIR / "metrics")
        web_socket = listen(host, port)  # held open here for as long as the children may start
        children += portal_processes(web_socket, processes)
        self.stdout.write(f"web: {processes} daphne process(es) on {host}:{port}")
        backend = get_backend()
        if isinstance(backend, SupportsLimits):  # what holds for tasks here, said at once
            for line in backend.describe_limits():
                self.stdout.write(f"limits: {line}")
        if no_sshd := host_sshd_missing(backend):
            self.stdout.write(f"ssh: {no_sshd}")
        stop = threading.Event()
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        shown = "localhost" if host in ("127.0.0.1", "0.0.0.0") else host  # noqa: S104
        self.stdout.write(self.style.SUCCESS(f"\nThe portal is up: open http://{shown}:{port}/\n"))
        supervise(children, stop, lambda line: self.stdout.write(line))
        if isinstance(backend, LocalBackend):
            backend.fence()  # no table of the task firewall left when no task runs
        self.stdout.write("stopped.")

    def ensure_redis(self) -> Child | None:
        """None when REDIS_URL (or REDIS_URL_FILE) is set and a Redis answers there; else a
        private redis-server with a password, started, whose URL this process (its checks) and
        its children use from now on. Never a Redis that merely answers at the default URL:
        without a password, every job on this machine could share it (the broker, the lock)."""
        set_here = os.environ.get("REDIS_URL") or os.environ.get("REDIS_URL_FILE")
        url = settings.REDIS_URL if set_here else ""
        if url and redis_answers(url):
            return None
        parts = urlsplit(url)
        why = f"no Redis answered at {parts.hostname}:{parts.port}" if url else "REDIS_URL is unset"
        binary = shutil.which("redis-server")
        if binary is None:
            raise CommandError(
                f"{why} and redis-server is not installed: "
                "install it (apt-get install redis-server) or set REDIS_URL."
            )
        port = free_port()
        command = [binary, str(private_redis_config(settings.VAR_DIR)), "--bind", "127.0.0.1"]
        command += ["--port", str(port), "--save", "", "--appendonly", "no"]
        child = Child("redis", command, quiet=True)
        process = child.run()
        password = stored_secret_key(settings.VAR_DIR / REDIS_PASSWORD_FILE)
        os.environ["REDIS_URL"] = f"redis://:{password}@127.0.0.1:{port}/0"  # children inherit it
        settings.REDIS_URL = os.environ["REDIS_URL"]
        deadline = time.monotonic() + 10
        while not redis_answers(os.environ["REDIS_URL"]):
            if time.monotonic() > deadline or process.poll() is not None:
                kill_group(process, signal.SIGKILL)
                raise CommandError("the private Redis server did not start")
            time.sleep(0.1)
        self.stdout.write(
            f"redis: started, pid {process.pid}: {why}, so a private "
            f"one serves redis://127.0.0.1:{port}/0 with the password in "
            f"{settings.VAR_DIR / REDIS_PASSWORD_FILE} (it stops with the portal)."
        )
        return child
