"""``manage.py runportal``: the whole portal in one command (what ``make run`` calls).

Migrates, creates the first admin, makes sure a Redis answers (starting a private one on a free
loopback port when none does), then runs the web server (HTTP + WebSocket), a Celery worker,
Celery beat and (local backend) the listener of ended tasks together until Ctrl-C or SIGTERM,
which stop them all. A process that dies on its
own (a crash, the OOM killer, a ``kill``) is started again after a short backoff, and the log
says so: one crashed worker no longer takes the portal down.
"""

from __future__ import annotations

import contextlib
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
from typing import Any

import redis
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from portal import webserver

FIRST_BACKOFF_SECONDS = 1.0  # a crashed process starts again after this, doubling while it
MAX_BACKOFF_SECONDS = 30.0  # keeps crashing (it lived less than HEALTHY_SECONDS), up to this
HEALTHY_SECONDS = 30.0
STOP_GRACE_SECONDS = 15.0


def redis_answers(url: str) -> bool:
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
        return bool(client.ping())
    except (redis.exceptions.RedisError, OSError, ValueError):
        return False


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Child:
    """One process of the portal, and how to start it again."""

    name: str
    start: Callable[[], subprocess.Popen[bytes]]
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    backoff: float = FIRST_BACKOFF_SECONDS
    restart_at: float = 0.0  # when ``process`` is None: when to start it again

    def run(self) -> None:
        self.process = self.start()
        self.started_at = time.monotonic()


def in_own_session(command: list[str], env: dict[str, str], **kwargs: Any) -> Callable[[], Any]:
    """Starts ``command`` in a session of its own: a crashed worker's pool processes can be
    killed with it, and only runportal hears Ctrl-C, so that it stops the children in order."""
    return lambda: subprocess.Popen(command, env=env, start_new_session=True, **kwargs)


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
                child.run()
                say(f"{child.name}: started, pid {child.process.pid}")  # type: ignore[union-attr]
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

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))

    def handle(self, *args: Any, **options: Any) -> None:
        children: list[Child] = []
        env = dict(os.environ)
        private_redis = self.ensure_redis(env)
        if private_redis is not None:
            children.append(private_redis)
        try:
            settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
            call_command("migrate", interactive=False, verbosity=0)
            call_command("ensure_admin")
        except BaseException:  # Ctrl-C or a failed migration: the private Redis stops too
            stop_all(children)
            raise
        python = sys.executable
        host, port = options["host"], options["port"]
        sock = webserver.listen(host, port)
        processes = webserver.default_processes()
        self.stdout.write(f"web: {processes} daphne process(es) on {host}:{port}")
        for number in range(1, processes + 1):
            children.append(Child(f"web-{number}", lambda: web_process(sock, env)))
        celery = [python, "-m", "celery", "-A", "portal"]
        commands = {
            "worker": [*celery, "worker", "-l", "info", "--concurrency", "2"],
            "beat": [
                *celery,
                *("beat", "-l", "warning", "--schedule"),
                str(settings.VAR_DIR / "celerybeat-schedule"),
            ],
        }
        if settings.CLUSTER_BACKEND == "local":  # wakes the loop the moment a task ends
            commands["watcher"] = [python, str(settings.BASE_DIR / "manage.py"), "watch_tasks"]
        for name, command in commands.items():
            children.append(Child(name, in_own_session(command, env)))
        stop = threading.Event()
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        shown = "localhost" if host in ("127.0.0.1", "0.0.0.0") else host  # noqa: S104
        self.stdout.write(self.style.SUCCESS(f"\nThe portal is up: open http://{shown}:{port}/\n"))
        supervise(children, stop, lambda line: self.stdout.write(line))
        self.stdout.write("stopped.")

    def ensure_redis(self, env: dict[str, str]) -> Child | None:
        url = settings.REDIS_URL
        if redis_answers(url):
            return None
        binary = shutil.which("redis-server")
        if binary is None:
            raise CommandError(
                f"No Redis answers at {url} and redis-server is not installed: "
                "install it (apt-get install redis-server) or set REDIS_URL."
            )
        port = free_port()
        command = [binary, "--bind", "127.0.0.1", "--port", str(port)]
        command += ["--save", "", "--appendonly", "no"]
        child = Child("redis", in_own_session(command, env, stdout=subprocess.DEVNULL))
        child.run()
        env["REDIS_URL"] = f"redis://127.0.0.1:{port}/0"
        deadline = time.monotonic() + 10
        while not redis_answers(env["REDIS_URL"]):
            assert child.process is not None
            if time.monotonic() > deadline or child.process.poll() is not None:
                kill_group(child.process, signal.SIGKILL)
                raise CommandError("the private Redis server did not start")
            time.sleep(0.1)
        self.stdout.write(
            f"redis: started, pid {child.process.pid}: no Redis answered at {url}, so a private "
            f"one serves {env['REDIS_URL']} (it stops with the portal)."
        )
        os.environ["REDIS_URL"] = env["REDIS_URL"]
        return child


def web_process(sock: socket.socket, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return webserver.start(sock, 1, env, new_session=True)[0]
