"""The web server: daphne processes sharing one listening socket.

Django runs a sync view on a single thread per process under ASGI, so one daphne process uses
one core for HTTP; several processes accept from the same socket (opened here, passed with
``--fd``) and use them all. WebSockets work in any of them (the channel layer is Redis).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys


def listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.set_inheritable(True)
    return sock


def start(
    sock: socket.socket,
    processes: int,
    env: dict[str, str],
    cwd: str | None = None,
    quiet: bool = False,
    new_session: bool = False,
) -> list[subprocess.Popen[bytes]]:
    """``processes`` daphne servers accepting on ``sock`` (``quiet``: no access log;
    ``new_session``: each in a session of its own, see ``runportal``)."""
    fd = sock.fileno()
    command = [sys.executable, "-m", "daphne", "--fd", str(fd), "portal.asgi:application"]
    out = subprocess.DEVNULL if quiet else None
    return [
        subprocess.Popen(
            command,
            env=env,
            cwd=cwd,
            pass_fds=(fd,),
            stdout=out,
            stderr=out,
            start_new_session=new_session,
        )
        for _ in range(processes)
    ]


def default_processes() -> int:
    return max(1, int(os.environ.get("WEB_PROCESSES") or os.cpu_count() or 1))
