"""The web terminal: a shell inside a running task, over a Channels WebSocket.

The backend says how to open the shell (``backend.shell(ref)``); here it runs under a pty.
Messages from the browser are JSON: ``{"type": "input", "data": "..."}`` and
``{"type": "resize", "cols": 80, "rows": 24}``. Owner and admins only; the Origin is checked by
the router (``AllowedHostsOriginValidator``), the user and the task on connect and every few
seconds after, and the session ends on idle, when the shell exits or when the task ends.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import fcntl
import json
import os
import signal
import struct
import subprocess
import termios
import time
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from clusters.backends.base import ShellSpec
from clusters.registry import get_backend
from jobs.access import visible_jobs
from jobs.models import Task
from jobs.states import TaskState

CHECK_SECONDS = 2.0


@database_sync_to_async
def running_task(user: Any, task_id: int) -> Task | None:
    """The task when ``user`` may open a terminal in it and it is running, else None."""
    if user is None or not user.is_authenticated or not user.is_active:
        return None
    return (
        Task.objects.filter(
            id=task_id, state=TaskState.RUNNING, attempt__job__in=visible_jobs(user)
        )
        .exclude(backend_ref="")
        .first()
    )


class TerminalConsumer(AsyncWebsocketConsumer):
    process: subprocess.Popen[bytes] | None = None
    master: int = -1
    watchdog: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        self.task_id = int(self.scope["url_route"]["kwargs"]["task_id"])
        task = await running_task(self.scope.get("user"), self.task_id)
        spec = await database_sync_to_async(get_backend().shell)(task.backend_ref) if task else None
        if spec is None:
            await self.close(code=4404)
            return
        await self.accept()
        self.start(spec)
        self.last_activity = time.monotonic()
        self.watchdog = asyncio.ensure_future(self.watch())

    def start(self, spec: ShellSpec) -> None:
        self.master, slave = os.openpty()
        self.process = subprocess.Popen(  # noqa: S603 - argv comes from the backend
            spec.argv,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=spec.cwd,
            env=spec.env,
            start_new_session=True,
        )
        os.close(slave)
        os.set_blocking(self.master, False)
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        asyncio.get_running_loop().add_reader(self.master, self.pump)

    def pump(self) -> None:
        try:
            data = os.read(self.master, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # the shell closed the pty: it exited
            asyncio.get_running_loop().remove_reader(self.master)
            asyncio.ensure_future(self.end("the shell exited"))
            return
        self.last_activity = time.monotonic()
        asyncio.ensure_future(self.send(text_data=self.decoder.decode(data)))

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            message = json.loads(text_data or "")
        except ValueError:
            return
        if not isinstance(message, dict) or self.master < 0:
            return
        if message.get("type") == "input" and isinstance(message.get("data"), str):
            self.last_activity = time.monotonic()
            with contextlib.suppress(OSError):
                os.write(self.master, message["data"].encode())
        elif message.get("type") == "resize":
            cols, rows = message.get("cols"), message.get("rows")
            if (
                isinstance(cols, int)
                and isinstance(rows, int)
                and 0 < cols < 1000
                and 0 < rows < 1000
            ):
                fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    async def watch(self) -> None:
        """End the session when it idles, when the user may no longer see the task, or when
        the task ends."""
        idle = settings.TERMINAL_IDLE_SECONDS
        while True:
            await asyncio.sleep(CHECK_SECONDS)
            if time.monotonic() - self.last_activity > idle:
                await self.end(f"closed after {idle} seconds without activity")
                return
            if await running_task(self.scope.get("user"), self.task_id) is None:
                await self.end("the task has ended")
                return

    async def end(self, why: str) -> None:
        with contextlib.suppress(Exception):
            await self.send(text_data=f"\r\n\x1b[33m[{why}]\x1b[0m\r\n")
        await self.close(code=4000)

    async def disconnect(self, code: int) -> None:
        if self.watchdog is not None:
            self.watchdog.cancel()
        if self.master >= 0:
            with contextlib.suppress(ValueError, OSError):
                asyncio.get_running_loop().remove_reader(self.master)
            os.close(self.master)
            self.master = -1
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGHUP)
            await asyncio.get_running_loop().run_in_executor(None, self.reap)

    def reap(self) -> None:
        assert self.process is not None
        try:
            self.process.wait(2)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
