"""``manage.py runportal``: the whole portal in one command on one port (what ``make run`` calls).

Does what no standard part does, then hands the processes to supervisord. Uses the Redis at
REDIS_URL when it is set and answers, else sets up a private one with a password on a free
loopback port; runs the system checks (which refuse a Redis or database local tasks could use
without a password), migrates and creates the first admin (printing its password). Then
supervisord runs ``portal_programs`` until Ctrl-C or SIGTERM, which stop them all, and starts
again one that dies on its own (a crash, the OOM killer, a ``kill``); uvicorn, one of them,
does the same for its worker processes.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from backends.base import SupportsLimits
from clusters.registry import get_backend, host_sshd_missing
from portal.apps import stored_secret_key
from portal.checks import redis_answers

STOP_GRACE_SECONDS = 15  # supervisord's SIGTERM to SIGKILL delay, per program
# A program that dies within a second of its start is started again after 1 s, 2 s, 3 s...:
# supervisord gives up after this many tries in a row (about half an hour), one that lived
# longer is started again at once.
START_RETRIES = 60
REDIS_PASSWORD_FILE = "redis_password"  # noqa: S105 - a file name, in var/ by the secret key
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def portal_programs(host: str, port: int, web_processes: int) -> dict[str, list[str]]:
    """What runs besides the private Redis, in the order supervisord starts them: the web
    server, a Celery worker, Celery beat, and the watcher that wakes the reconcile loop when a
    task ends or a pod changes (``watchcluster``)."""
    python = sys.executable
    celery = [python, "-m", "celery", "-A", "portal"]
    schedule = str(settings.VAR_DIR / "celerybeat-schedule")
    return {
        "web": web_command(host, port, web_processes),
        "worker": [*celery, "worker", "-l", "info", "--concurrency", "2"],
        "beat": [*celery, "beat", "-l", "warning", "--schedule", schedule],
        "watcher": [python, str(settings.BASE_DIR / "manage.py"), "watchcluster"],
    }


KEEP_ALIVE_SECONDS = 75  # as nginx keeps an idle client connection


def accepting(web: tuple[str, int], supervisord: subprocess.Popen[bytes]) -> bool:
    """Whether the web server at ``web`` (host, port) accepts a connection, waited for while
    ``supervisord`` runs: "the portal is up" said before it listened sent people to a refused
    connection."""
    host, port = web
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)  # noqa: S104
    while supervisord.poll() is None:
        try:
            socket.create_connection((host, port), timeout=1).close()
        except OSError:
            time.sleep(0.1)
            continue
        return True
    return False


def web_command(host: str, port: int, processes: int) -> list[str]:
    """uvicorn serving HTTP and WebSockets: ``processes`` workers on the one port (Django runs
    sync views on one thread per process, so one per core), each started again when it dies.
    h11 parses HTTP: a request head more than 16 KiB of which is still incomplete after a read
    gets a 400 (httptools reads a header of any length into memory). No lifespan (Channels'
    router has none); the client address is the connection's, never an X-Forwarded-For a local
    task could send. An idle keep-alive connection stays open ``KEEP_ALIVE_SECONDS`` (uvicorn's
    5 s closed a script's connection between two of its calls: http.client does not retry).
    ``portal.serve`` is uvicorn's command line with TCP_NODELAY on each connection."""
    return [
        *[sys.executable, "-m", "portal.serve", "portal.asgi:application"],
        *["--host", host, "--port", str(port), "--workers", str(processes)],
        *["--http", "h11", "--lifespan", "off", "--no-proxy-headers"],
        *["--timeout-keep-alive", str(KEEP_ALIVE_SECONDS), "--timeout-graceful-shutdown", "10"],
    ]


def supervisord_conf(programs: dict[str, list[str]], var_dir: Path) -> Path:
    """supervisord's configuration in ``var/``: every program's output on supervisord's own,
    each stopped with whatever it started (a Celery worker's pool processes), the last started
    first."""
    lines = [
        "; Written by manage.py runportal at each start.",
        "[supervisord]",
        "nodaemon=true",
        "logfile=/dev/null",  # its log goes to its standard output (nodaemon)
        "logfile_maxbytes=0",
        "pidfile=" + str(var_dir / "supervisord.pid").replace("%", "%%"),
        *(["user=root"] if os.geteuid() == 0 else []),  # as it was started: said, not warned
    ]
    for priority, (name, command) in enumerate(programs.items(), start=1):
        output = "NONE" if name == "redis" else "/dev/stdout"
        lines += [
            f"[program:{name}]",
            "command=" + shlex.join(command).replace("%", "%%"),
            f"priority={priority}",
            "autorestart=true",
            f"startretries={START_RETRIES}",
            "stopasgroup=true",
            "killasgroup=true",
            f"stopwaitsecs={STOP_GRACE_SECONDS}",
            "redirect_stderr=true",
            f"stdout_logfile={output}",
            "stdout_logfile_maxbytes=0",
        ]
    path = var_dir / "supervisord.conf"
    path.write_text("\n".join(lines) + "\n")
    return path


def stop_with(parent: int) -> Callable[[], None]:
    """What supervisord runs before its command: ask Linux for a SIGTERM when runportal dies,
    even by SIGKILL (or the OOM killer), so that it stops the programs rather than leave a server
    holding the port, the private Redis or the database (supervisord has no such setting).
    Runs between fork and exec: ctypes only, nothing that locks."""

    def ask() -> None:
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # runportal died before the request took hold
            os._exit(1)

    return ask


def metrics_files(folder: Path) -> None:
    """Where the web processes keep their API latency counts for GET /metrics (portal.metrics:
    prometheus_client's multiprocess mode), emptied at each start as its docs ask."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(folder)  # the programs inherit it


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


def append_to_output_files() -> None:
    """Where standard output or error is a file (``make run > log``), make every process write
    at its end: supervisord's programs each open it again (``/dev/stdout``), and a process
    writing at an offset of its own would write over the others' lines."""
    for fd in (1, 2):
        if stat.S_ISREG(os.fstat(fd).st_mode):
            appending = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_APPEND)
            os.dup2(appending, fd)
            os.close(appending)


class Command(BaseCommand):
    help = "Run the web server, a Celery worker and Celery beat together (Ctrl-C stops all)."
    # Run in handle once ensure_redis has chosen the Redis: the check of one tasks could use
    # (portal.E006) is about that one, not the default URL a private Redis replaces.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))

    def handle(self, *args: Any, **options: Any) -> None:
        settings.VAR_DIR.mkdir(parents=True, exist_ok=True)  # Redis's password, SQLite, beat
        private_redis = self.ensure_redis()
        self.check(display_num_errors=True)
        call_command("migrate", interactive=False, verbosity=0)
        call_command("ensure_admin")
        host, port = options["host"], options["port"]
        os.environ["PORT"] = str(port)  # the port tasks may reach (the backend's firewall)
        processes = web_processes()
        metrics_files(settings.VAR_DIR / "metrics")
        programs = {"redis": private_redis} if private_redis else {}
        programs |= portal_programs(host, port, processes)
        self.stdout.write(f"web: uvicorn, {processes} worker process(es) on {host}:{port}")
        backend = get_backend()
        if isinstance(backend, SupportsLimits):  # what holds for tasks here, said at once
            for line in backend.describe_limits():
                self.stdout.write(f"limits: {line}")
        if no_sshd := host_sshd_missing(backend):
            self.stdout.write(f"ssh: {no_sshd}")
        shown = "localhost" if host in ("127.0.0.1", "0.0.0.0") else host  # noqa: S104
        ready = self.style.SUCCESS(f"\nThe portal is up: open http://{shown}:{port}/\n")
        code = self.supervise(supervisord_conf(programs, settings.VAR_DIR), (host, port), ready)
        if isinstance(backend, SupportsLimits):
            backend.fence()  # e.g. no table of the task firewall left when no task runs
        if code:
            raise CommandError(f"supervisord exited with code {code}")
        self.stdout.write("stopped.")

    def supervise(self, conf: Path, web: tuple[str, int], ready: str) -> int:
        """Run supervisord on ``conf`` until it ends, on this process's output, saying
        ``ready`` once the web server accepts connections at ``web``; Ctrl-C and SIGTERM stop
        it."""
        self.stdout.flush()
        append_to_output_files()
        supervisord = subprocess.Popen(
            [sys.executable, "-m", "supervisor.supervisord", "-c", str(conf)],
            start_new_session=True,  # only runportal hears Ctrl-C, and stops it
            preexec_fn=stop_with(os.getpid()) if sys.platform == "linux" else None,
        )

        def stop(*_: Any) -> None:
            with contextlib.suppress(ProcessLookupError):
                supervisord.terminate()

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        if accepting(web, supervisord):
            self.stdout.write(ready)
            self.stdout.flush()
        return supervisord.wait()

    def ensure_redis(self) -> list[str] | None:
        """None when REDIS_URL (or REDIS_URL_FILE) is set and a Redis answers there; else the
        command of a private redis-server with a password, whose URL this process (its checks)
        and the programs use from now on. Never a Redis that merely answers at the default URL:
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
        password = stored_secret_key(settings.VAR_DIR / REDIS_PASSWORD_FILE)
        os.environ["REDIS_URL"] = f"redis://:{password}@127.0.0.1:{port}/0"  # programs inherit it
        settings.REDIS_URL = os.environ["REDIS_URL"]
        self.stdout.write(
            f"redis: {why}, so a private one serves redis://127.0.0.1:{port}/0 with the "
            f"password in {settings.VAR_DIR / REDIS_PASSWORD_FILE} (it stops with the portal)."
        )
        return command
