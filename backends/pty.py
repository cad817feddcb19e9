"""The local backend's web terminal: a ``ShellSpec`` run on this machine under a pty of its own,
the ``base.TerminalSession`` that ``LocalBackend.shell`` opens and ``jobs.terminal`` drives."""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import signal
import struct
import subprocess
import termios
from dataclasses import dataclass


@dataclass(frozen=True)
class ShellSpec:
    """How to open an interactive shell inside a running task: run ``argv`` under a pty."""

    argv: list[str]
    env: dict[str, str]
    cwd: str


class PtySession:
    """A ``TerminalSession``: ``spec.argv`` run on this machine under a pty of its own."""

    def __init__(self, spec: ShellSpec) -> None:
        self.master, slave = os.openpty()
        try:
            self.process = subprocess.Popen(  # noqa: S603 - argv comes from the backend
                spec.argv,
                stdin=slave,
                stdout=slave,
                stderr=slave,
                cwd=spec.cwd,
                env=spec.env,
                start_new_session=True,
                umask=0o077,  # what the shell writes in the task is private, as the task's own
            )
        except BaseException:
            os.close(self.master)
            raise
        finally:
            os.close(slave)
        os.set_blocking(self.master, False)

    def read(self, timeout: float) -> bytes | None:
        if self.master < 0:
            return b""
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return None
        try:
            return os.read(self.master, 65536)  # b"" or EIO: the shell closed the pty
        except BlockingIOError:
            return None
        except OSError:
            return b""

    def write(self, data: bytes) -> None:
        with contextlib.suppress(OSError):
            os.write(self.master, data)

    def resize(self, cols: int, rows: int) -> None:
        with contextlib.suppress(OSError):
            fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def task_ended(self) -> bool:
        """Whether the shell was killed (SIGKILL): its task's sandbox ended under it."""
        try:
            code = self.process.wait(1)
        except subprocess.TimeoutExpired:
            return False
        return code == -signal.SIGKILL

    def close(self) -> None:
        if self.master >= 0:
            os.close(self.master)
            self.master = -1
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGHUP)
            try:
                self.process.wait(2)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
