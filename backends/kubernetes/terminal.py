"""The web terminal on Kubernetes: an interactive shell in a task's container, over a pod exec
stream (WebSocket, ``channel.k8s.io``: every message starts with its channel, 0 stdin, 1 stdout,
2 stderr, 3 the exit status, 4 terminal size as ``{"Width": cols, "Height": rows}``).

The shell gets the task's environment from ``/pai/env.sh`` (written next to the bootstrap
script, see ``manifests.script_secret``) and starts in ``$PAI_WORK_DIR``.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from kubernetes import client
from kubernetes.stream import stream

STDOUT, STDERR, RESIZE = 1, 2, 4
ENV_FILE = "/pai/env.sh"
SHELL = (
    f'. {ENV_FILE} 2>/dev/null; cd "${{PAI_WORK_DIR:-.}}" 2>/dev/null; '
    'exec "${SHELL:-$(command -v bash || echo /bin/sh)}" -i'
)
SHELL_COMMAND = ["/bin/sh", "-c", SHELL]


class ExecSession:
    """A ``TerminalSession`` (``base.py``) over a ``WSClient`` opened in binary mode."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws

    def read(self, timeout: float) -> bytes | None:
        ws = self.ws
        if not ws.is_open():
            return self._buffered() or b""
        try:
            ws.update(timeout=timeout)
        except Exception:  # the connection broke: the session is over
            with contextlib.suppress(Exception):
                ws.close()
        data = self._buffered()
        if data:
            return data
        return None if ws.is_open() else b""

    def _buffered(self) -> bytes:
        return bytes(self.ws.read_channel(STDOUT) or b"") + bytes(
            self.ws.read_channel(STDERR) or b""
        )

    def write(self, data: bytes) -> None:
        if self.ws.is_open():
            self.ws.write_stdin(data)

    def resize(self, cols: int, rows: int) -> None:
        if self.ws.is_open():
            self.ws.write_channel(RESIZE, json.dumps({"Width": cols, "Height": rows}).encode())

    def task_ended(self) -> bool:
        """An exec stream ends with its shell; whether the pod went too is for the page's next
        look at the task, not this stream."""
        return False

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.ws.close()


def open_exec(
    api_client: client.ApiClient, namespace: str, pod: str, command: list[str], tty: bool = True
) -> Any:
    """A live exec session in the pod's ``main`` container (a binary ``WSClient``).

    ``stream`` swaps the transport of the ``ApiClient`` it is given while it connects, so the
    exec gets a client of its own: the backend's, shared by other threads, is left alone.
    """
    own = client.ApiClient(api_client.configuration)
    try:
        return stream(
            client.CoreV1Api(own).connect_get_namespaced_pod_exec,
            pod,
            namespace,
            container="main",
            command=command,
            stdin=True,
            stdout=True,
            stderr=True,
            tty=tty,
            binary=True,
            _preload_content=False,
        )
    finally:
        own.close()  # type: ignore[no-untyped-call]
