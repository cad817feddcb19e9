"""``manage.py runportal``: the whole portal in one command (what ``make run`` calls).

Migrates, creates the first admin, makes sure a Redis answers (starting a private one on a free
loopback port when none does), then runs the web server (HTTP + WebSocket), a Celery worker and
Celery beat together until Ctrl-C, which stops them all.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from typing import Any

import redis
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from portal import webserver


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


class Command(BaseCommand):
    help = "Run the web server, a Celery worker and Celery beat together (Ctrl-C stops all)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))

    def handle(self, *args: Any, **options: Any) -> None:
        children: list[subprocess.Popen[bytes]] = []
        env = dict(os.environ)
        private_redis = self.ensure_redis(env)
        if private_redis is not None:
            children.append(private_redis)
        settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
        call_command("migrate", interactive=False, verbosity=0)
        call_command("ensure_admin")
        python = sys.executable
        host, port = options["host"], options["port"]
        sock = webserver.listen(host, port)
        processes = webserver.default_processes()
        self.stdout.write(f"starting web: {processes} daphne process(es) on {host}:{port}")
        children += webserver.start(sock, processes, env)
        commands = {
            "worker": [
                python,
                "-m",
                "celery",
                "-A",
                "portal",
                "worker",
                "-l",
                "info",
                "--concurrency",
                "2",
            ],
            "beat": [
                python,
                "-m",
                "celery",
                "-A",
                "portal",
                "beat",
                "-l",
                "warning",
                "--schedule",
                str(settings.VAR_DIR / "celerybeat-schedule"),
            ],
        }
        for name, command in commands.items():
            self.stdout.write(f"starting {name}: {' '.join(command[1:])}")
            children.append(subprocess.Popen(command, env=env))
        shown = "localhost" if host in ("127.0.0.1", "0.0.0.0") else host  # noqa: S104
        self.stdout.write(self.style.SUCCESS(f"\nThe portal is up: open http://{shown}:{port}/\n"))
        self.wait(children)

    def ensure_redis(self, env: dict[str, str]) -> subprocess.Popen[bytes] | None:
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
        process = subprocess.Popen(
            [
                binary,
                "--bind",
                "127.0.0.1",
                "--port",
                str(port),
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
        )
        env["REDIS_URL"] = f"redis://127.0.0.1:{port}/0"
        deadline = time.monotonic() + 10
        while not redis_answers(env["REDIS_URL"]):
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise CommandError("the private Redis server did not start")
            time.sleep(0.1)
        self.stdout.write(
            f"No Redis answered at {url}: started a private Redis at {env['REDIS_URL']} "
            "(it stops with the portal)."
        )
        os.environ["REDIS_URL"] = env["REDIS_URL"]
        return process

    def wait(self, children: list[subprocess.Popen[bytes]]) -> None:
        stopping = False

        def stop(*_: object) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        while not stopping and all(child.poll() is None for child in children):
            time.sleep(0.3)
        if not stopping:
            self.stderr.write("a process of the portal exited; stopping the others")
        self.stdout.write("stopping…")
        for child in reversed(children):
            if child.poll() is None:
                child.terminate()
        deadline = time.monotonic() + 15
        for child in reversed(children):
            try:
                child.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
        self.stdout.write("stopped.")
