"""The web terminal: a shell inside a running task, over a Channels WebSocket.

The backend opens the shell (``backend.shell(ref)``, a ``base.TerminalSession``: a process under
a pty of this machine for the local backend, a pod exec stream on Kubernetes) and the consumer
drives it. A reader
thread per terminal blocks in ``session.read`` and hands the output to the event loop.

Messages from the browser are JSON: ``{"type": "input", "data": "..."}`` and
``{"type": "resize", "cols": 80, "rows": 24}``. Owner and admins only; the Origin is checked by
the router (``portal.origin.SameOriginValidator``: the portal's own scheme, host and
port), the user and the task on connect and every few
seconds after, and the session ends on idle, when the shell exits or when the task ends.

Close codes the page can rely on: ``4404`` right after the WebSocket is accepted, before any
data, when there is no terminal for this user (not the owner nor an admin, no such task, the task
is not running, or its shell could not be opened); ``4000`` after a last line in brackets that
says why (idle, the shell exited, the task ended). A refusal is an accept then a close, not a
close before accepting, which ASGI servers turn into an HTTP 403 the browser sees as 1006.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import threading
import time
from typing import Any

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from backends.base import TerminalSession
from clusters.registry import get_backend
from jobs.access import visible_jobs
from jobs.models import Task
from jobs.states import TaskState

CHECK_SECONDS = 2.0
READ_SECONDS = 0.25  # how long the reader blocks at a time, so that it sees a disconnect soon
NO_TERMINAL = 4404
ENDED = 4000


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


def open_session(ref: str) -> TerminalSession | None:
    return get_backend().shell(ref)


def why_it_ended(session: TerminalSession | None) -> str:
    """A shell killed with its task: the task has ended, not just the shell."""
    if session is not None and session.task_ended():
        return "the task has ended"
    return "the shell exited"


class TerminalConsumer(AsyncWebsocketConsumer):
    session: TerminalSession | None = None
    reader: threading.Thread | None = None
    watchdog: asyncio.Task[None] | None = None
    pump_task: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        self.task_id = int(self.scope["url_route"]["kwargs"]["task_id"])
        task = await running_task(self.scope.get("user"), self.task_id)
        opener = sync_to_async(open_session, thread_sensitive=False)
        session = await opener(task.backend_ref) if task else None
        await self.accept()
        if session is None:
            await self.close(code=NO_TERMINAL)
            return
        self.session = session
        self.output: asyncio.Queue[bytes] = asyncio.Queue()
        self.stopping = threading.Event()
        self.last_activity = time.monotonic()
        self.reader = threading.Thread(
            target=self.read_loop,
            args=(session, asyncio.get_running_loop()),
            name=f"terminal-{self.task_id}",
            daemon=True,
        )
        self.reader.start()
        self.pump_task = asyncio.ensure_future(self.pump())
        self.watchdog = asyncio.ensure_future(self.watch())

    def read_loop(self, session: TerminalSession, loop: asyncio.AbstractEventLoop) -> None:
        """In the reader thread: the session's output to the loop, b"" last when it ends."""
        while not self.stopping.is_set():
            try:
                data = session.read(READ_SECONDS)
            except Exception:
                data = b""
            if data is None:
                continue
            try:
                loop.call_soon_threadsafe(self.output.put_nowait, data)
            except RuntimeError:  # the loop is closed
                return
            if not data:
                return

    async def pump(self) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        while True:
            data = await self.output.get()
            if not data:
                await self.end(await asyncio.to_thread(why_it_ended, self.session))
                return
            self.last_activity = time.monotonic()
            await self.send(text_data=decoder.decode(data))

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            message = json.loads(text_data or "")
        except ValueError:
            return
        session = self.session
        if not isinstance(message, dict) or session is None:
            return
        if message.get("type") == "input" and isinstance(message.get("data"), str):
            self.last_activity = time.monotonic()
            await asyncio.to_thread(session.write, message["data"].encode())
        elif message.get("type") == "resize":
            cols, rows = message.get("cols"), message.get("rows")
            if (
                isinstance(cols, int)
                and isinstance(rows, int)
                and 0 < cols < 1000
                and 0 < rows < 1000
            ):
                await asyncio.to_thread(session.resize, cols, rows)

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
        await self.close(code=ENDED)

    async def disconnect(self, code: int) -> None:
        for job in (self.watchdog, self.pump_task):
            if job is not None and job is not asyncio.current_task():
                job.cancel()
        session, self.session = self.session, None
        if session is not None:
            self.stopping.set()
            await asyncio.to_thread(self.finish, session)

    def finish(self, session: TerminalSession) -> None:
        """Wait for the reader to stop (within ``READ_SECONDS``), then end the shell."""
        if self.reader is not None:
            self.reader.join()
        session.close()
