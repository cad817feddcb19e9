"""A small Kubernetes API server on loopback, for the backend's tests and the reconcile benchmark.

It serves the REST paths the official client calls for core/v1 pods, services, configmaps,
secrets (create, read, list with a label selector, delete, delete collection), nodes, pod logs
and pod exec (a tiny shell over the WebSocket stream), keeps objects in memory, deletes
dependents when their owner goes (as the garbage collector does), and lets a test answer the
next calls with an error or drop the connection.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import re
import sys
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

KINDS = {"pods": "Pod", "services": "Service", "configmaps": "ConfigMap", "secrets": "Secret"}
_NAMESPACED = re.compile(r"/api/v1/namespaces/([^/]+)/(\w+)(?:/([^/]+))?(?:/(log|exec))?")
_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def matches(labels: dict[str, str], selector: str) -> bool:
    for term in filter(None, (selector or "").split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    return True


@dataclass
class ExecRecord:
    """One exec session: the pod, the query (``command``, ``tty``, ...), what came in."""

    pod: str
    query: dict[str, list[str]]
    stdin: bytes = b""
    resizes: list[dict[str, int]] = field(default_factory=list)


class FakeCluster:
    """The state behind the server: objects, logs, injected faults and a request log."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}  # (kind, ns, name)
        self.nodes: list[dict[str, Any]] = []
        self.logs: dict[str, bytes] = {}
        self.created: list[dict[str, Any]] = []  # every manifest as posted
        self.requests: Counter[tuple[str, str]] = Counter()  # (method, path without query)
        self.faults: list[int] = []  # statuses for the next calls; 0 = drop the connection
        self.create_fault: int | None = None  # a status every create answers while set
        self.execs: list[ExecRecord] = []  # every exec session opened, in order

    # -- what tests drive --------------------------------------------------------------------

    def fail_next(self, count: int, status: int = 429) -> None:
        with self.lock:
            self.faults.extend([status] * count)

    def pods(self, namespace: str = "default") -> dict[str, dict[str, Any]]:
        return {n: o for (k, ns, n), o in self.objects.items() if k == "pods" and ns == namespace}

    def set_status(self, name: str, status: dict[str, Any], namespace: str = "default") -> None:
        with self.lock:
            pod = self.objects[("pods", namespace, name)]
            pod["status"] = status
            if "nodeName" in status:
                pod["spec"]["nodeName"] = status.pop("nodeName")

    def put_pod(self, pod: dict[str, Any], namespace: str = "default") -> None:
        with self.lock:
            self.objects[("pods", namespace, pod["metadata"]["name"])] = pod

    # -- what the server does ----------------------------------------------------------------

    def create(self, kind: str, ns: str, obj: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        name = obj["metadata"]["name"]
        with self.lock:
            self.created.append(json.loads(json.dumps(obj)))
            if (kind, ns, name) in self.objects:
                return 409, status(409, "AlreadyExists", f'{kind} "{name}" already exists')
            meta = obj["metadata"]
            meta.update(namespace=ns, uid=str(uuid.uuid4()), creationTimestamp=now())
            meta["resourceVersion"] = str(len(self.created))
            if kind == "pods":
                obj["status"] = {"phase": "Pending"}
            self.objects[(kind, ns, name)] = obj
            return 201, obj

    def delete(self, kind: str, ns: str, name: str) -> dict[str, Any] | None:
        with self.lock:
            obj = self.objects.pop((kind, ns, name), None)
            if obj is not None:
                self._collect(obj["metadata"]["uid"])
            return obj

    def _collect(self, uid: str) -> None:
        """Background propagation: dependents of a deleted owner go too."""
        for key, obj in list(self.objects.items()):
            owners = obj["metadata"].get("ownerReferences") or []
            if any(o["uid"] == uid for o in owners) and self.objects.pop(key, None):
                self._collect(obj["metadata"]["uid"])

    def select(self, kind: str, ns: str, selector: str) -> list[dict[str, Any]]:
        with self.lock:
            return [
                obj
                for (k, n, _), obj in self.objects.items()
                if k == kind and n == ns and matches(obj["metadata"].get("labels") or {}, selector)
            ]


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
            "reason": reason, "message": message}  # fmt: skip


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    cluster: FakeCluster

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.route("GET")

    def do_POST(self) -> None:
        self.route("POST")

    def do_DELETE(self) -> None:
        self.route("DELETE")

    def route(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        payload = json.loads(self.rfile.read(length)) if length else None
        cluster = self.cluster
        with cluster.lock:
            cluster.requests[(method, url.path)] += 1
            fault = cluster.faults.pop(0) if cluster.faults else None
        if fault == 0:
            self.close_connection = True  # no answer at all: the client sees a dropped connection
            self.connection.shutdown(2)
            return
        if fault is None and method == "POST":
            fault = cluster.create_fault
        if fault is not None:
            reason = {429: "TooManyRequests", 422: "Invalid"}.get(fault, "InternalError")
            self.send_json(fault, status(fault, reason, "injected"), retry_after="0")
            return
        if url.path == "/api/v1/nodes" and method == "GET":
            self.send_json(200, {"kind": "NodeList", "apiVersion": "v1", "items": cluster.nodes})
            return
        match = _NAMESPACED.fullmatch(url.path)
        if not match or match.group(2) not in KINDS:
            self.send_json(404, status(404, "NotFound", url.path))
            return
        ns, kind, name, sub = match.groups()
        if sub == "exec":
            with cluster.lock:
                pod = cluster.objects.get(("pods", ns, name))
            if pod is None:
                self.send_json(404, status(404, "NotFound", f'pods "{name}" not found'))
            else:
                self.exec_session(name)
        elif sub == "log":
            self.send_log(ns, name, query)
        elif method == "POST":
            self.send_json(*cluster.create(kind, ns, payload))
        elif method == "GET" and name:
            with cluster.lock:
                obj = cluster.objects.get((kind, ns, name))
            self.send_found(obj, kind, name)
        elif method == "GET":
            items = cluster.select(kind, ns, query.get("labelSelector", ""))
            self.send_json(200, {"kind": KINDS[kind] + "List", "apiVersion": "v1",
                                 "metadata": {"resourceVersion": "1"}, "items": items})  # fmt: skip
        elif method == "DELETE" and name:
            self.send_found(cluster.delete(kind, ns, name), kind, name)
        else:  # delete collection
            gone = cluster.select(kind, ns, query.get("labelSelector", ""))
            for obj in gone:
                cluster.delete(kind, ns, obj["metadata"]["name"])
            self.send_json(200, {"kind": KINDS[kind] + "List", "apiVersion": "v1", "items": gone})

    def send_found(self, obj: dict[str, Any] | None, kind: str, name: str) -> None:
        if obj is None:
            self.send_json(404, status(404, "NotFound", f'{kind} "{name}" not found'))
        else:
            self.send_json(200, obj)

    def send_log(self, ns: str, name: str, query: dict[str, str]) -> None:
        with self.cluster.lock:
            pod = self.cluster.objects.get(("pods", ns, name))
            data = self.cluster.logs.get(name, b"")
        if pod is None:
            self.send_json(404, status(404, "NotFound", f'pods "{name}" not found'))
            return
        if pod["status"].get("phase") == "Pending":
            message = f'container "main" in pod "{name}" is waiting to start'
            self.send_json(400, status(400, "BadRequest", message))
            return
        if "tailLines" in query:
            lines = data.splitlines(keepends=True)
            data = b"".join(lines[-int(query["tailLines"]) :])
        if "limitBytes" in query:
            data = data[: int(query["limitBytes"])]
        self.send_bytes(200, data, "text/plain")

    def exec_session(self, name: str) -> None:
        """A WebSocket exec (channel.k8s.io) into a tiny shell with a tty: it prints a prompt,
        echoes what is typed, runs ``echo ...`` and ``exit`` lines (anything else is "not
        found"), and records the exec's query, its stdin and every resize (channel 4)."""
        key = self.headers.get("Sec-WebSocket-Key", "")
        accept = base64.b64encode(
            hashlib.sha1((key + _WS_GUID).encode(), usedforsecurity=False).digest()
        ).decode()
        protocols = [p.strip() for p in self.headers.get("Sec-WebSocket-Protocol", "").split(",")]
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        if "v4.channel.k8s.io" in protocols:
            self.send_header("Sec-WebSocket-Protocol", "v4.channel.k8s.io")
        self.end_headers()
        session = ExecRecord(name, parse_qs(urlsplit(self.path).query))
        with self.cluster.lock:
            self.cluster.execs.append(session)
        self.close_connection = True
        prompt, line = f"{name}$ ".encode(), b""
        self.ws_send(1, prompt)
        while (frame := self.ws_receive()) is not None:
            channel, data = frame[:1], frame[1:]
            if channel == b"\x04":
                session.resizes.append(json.loads(data))
                continue
            session.stdin += data
            for byte in data.replace(b"\r\n", b"\n").replace(b"\r", b"\n"):
                if byte != 10:
                    line += bytes([byte])
                    self.ws_send(1, bytes([byte]))
                    continue
                command, line = line.decode(), b""
                if command.strip() == "exit":
                    self.ws_send(1, b"\r\n")
                    self.ws_send(3, json.dumps({"metadata": {}, "status": "Success"}).encode())
                    self.ws_close()
                    return
                said = command[5:] if command.startswith("echo ") else f"sh: {command}: not found"
                self.ws_send(1, b"\r\n" + said.encode() + b"\r\n" + prompt)
        self.ws_close()

    def ws_close(self) -> None:
        with contextlib.suppress(OSError):
            self.wfile.write(b"\x88\x02\x03\xe8")  # close, normal

    def ws_send(self, channel: int, data: bytes) -> None:
        payload = bytes([channel]) + data
        size = len(payload)
        head = bytes([0x82, size]) if size < 126 else bytes([0x82, 126]) + size.to_bytes(2, "big")
        self.wfile.write(head + payload)

    def ws_receive(self) -> bytes | None:
        """One frame from the client (clients mask theirs); None when it closes."""
        head = self.rfile.read(2)
        if len(head) < 2:  # the client went away
            return None
        first, second = head
        size = second & 0x7F
        if size == 126:
            size = int.from_bytes(self.rfile.read(2), "big")
        elif size == 127:
            size = int.from_bytes(self.rfile.read(8), "big")
        mask = self.rfile.read(4)
        data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(size)))
        return None if first & 0x0F == 0x8 else data

    def send_json(self, code: int, obj: Any, retry_after: str | None = None) -> None:
        extra = {"Retry-After": retry_after} if retry_after else {}
        self.send_bytes(code, json.dumps(obj).encode(), "application/json", extra)

    def send_bytes(
        self, code: int, data: bytes, content_type: str, extra: dict[str, str] | None = None
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up (a reset keep-alive connection) is no error of the fake's."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@contextmanager
def serve() -> Iterator[tuple[str, FakeCluster]]:
    """``(url, cluster)`` of a fake API server running in a thread until the block ends."""
    cluster = FakeCluster()
    handler = type("BoundHandler", (Handler,), {"cluster": cluster})
    server = Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", cluster
    finally:
        server.shutdown()
        server.server_close()
