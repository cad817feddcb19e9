"""The real servers of the alert tests, each a process of its own on a free loopback port:
an SMTP server (aiosmtpd, writing what it receives to a Maildir) and the webhook receiver
(``receiver.py``). Either may be stopped and started again on the same port."""

from __future__ import annotations

import json
import mailbox
import subprocess
import sys
from email.message import Message
from pathlib import Path
from typing import Any

from tests.support.servers import free_port, wait_for_port

HERE = Path(__file__).resolve().parent


class Process:
    what = "server"

    def __init__(self) -> None:
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self) -> None:
        self.process = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL)
        wait_for_port(self.port, self.process, self.what)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        self.process = None


class SmtpServer(Process):
    what = "aiosmtpd"

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.maildir = root / "maildir"

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "aiosmtpd", "-n", "-l", f"127.0.0.1:{self.port}",
            "-c", "aiosmtpd.handlers.Mailbox", str(self.maildir),
        ]  # fmt: skip

    def messages(self) -> list[Message]:
        if not self.maildir.exists():
            return []
        return list(mailbox.Maildir(self.maildir, create=False))


class WebhookReceiver(Process):
    what = "webhook receiver"

    def __init__(self, root: Path, secret: str) -> None:
        super().__init__()
        self.secret = secret
        self.log = root / "deliveries.jsonl"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/portal?from=tests"

    def command(self) -> list[str]:
        return [
            sys.executable,
            str(HERE / "receiver.py"),
            str(self.port),
            self.secret,
            str(self.log),
        ]

    def deliveries(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]
