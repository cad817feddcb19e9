"""A Kubernetes API server on loopback, as strict as a real one where the portal depends on it,
for the backend's tests and the benchmarks.

It serves the REST paths the official client calls for core/v1 pods, services, configmaps and
secrets (create, read, list and watch with a label selector, delete, delete collection), nodes,
pod logs and pod exec (a tiny shell over the WebSocket stream), and behaves as the real server:

- every change takes the next ``resourceVersion``; a list carries the version it is at, and a
  watch from a version sends every change after it (``ADDED``, ``MODIFIED``, ``DELETED``), with
  ``BOOKMARK`` events when asked (``allowWatchBookmarks``), and an ``ERROR`` event holding a 410
  ``Expired`` Status for a version older than the history kept (``compact``);
- a deleted pod that runs on a node stays, Terminating (``deletionTimestamp`` set), for its
  grace period, then goes with a ``DELETED`` event (``advance`` moves the fake's clock); pods
  never scheduled or already finished go at once, as the real server does;
- dependents go when their owner does (the garbage collector, background propagation);
- exec into a pod that is not running is refused with the real server's Status; the WebSocket
  subprotocol is the first of the client's list the server speaks (``v5.channel.k8s.io`` first);
- label selectors with ``=``, ``==``, ``!=``, ``in``, ``notin``, ``key`` and ``!key``;
- names, label keys and values and the 1 MiB Secret limit validated with 422 ``Invalid`` bodies;
- a test can answer the next calls with an error, with or without ``Retry-After``, drop the
  connection, or break every open watch mid-stream.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import re
import socket
import sys
import threading
import time
import uuid
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

from tests.support.k8s_rules import (
    SelectorError,
    invalid,
    parse_selector,
    secret_data,
    selects,
    status,
    validate,
)

KINDS = {"pods": "Pod", "services": "Service", "configmaps": "ConfigMap", "secrets": "Secret"}
_NAMESPACED = re.compile(r"/api/v1/namespaces/([^/]+)/(\w+)(?:/([^/]+))?(?:/(log|exec))?")
_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
# What the server speaks, best first; it takes the first of the client's list it knows.
CHANNEL_PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io", "v3.channel.k8s.io",
                     "v2.channel.k8s.io", "channel.k8s.io")  # fmt: skip
DEFAULT_GRACE_SECONDS = 30
REASONS = {400: "BadRequest", 403: "Forbidden", 404: "NotFound", 409: "AlreadyExists",
           422: "Invalid", 429: "TooManyRequests", 500: "InternalError",
           503: "ServiceUnavailable"}  # fmt: skip


def timestamp(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def copy(obj: dict[str, Any]) -> dict[str, Any]:
    return orjson.loads(orjson.dumps(obj))  # type: ignore[no-any-return]


def strings(secret: dict[str, Any]) -> dict[str, str]:
    """A stored Secret's data as text (the server keeps ``stringData`` base64-encoded in
    ``data``)."""
    return {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}


@dataclass
class ExecRecord:
    """One exec session: the pod, the query (``command``, ``tty``, ...), what came in."""

    pod: str
    query: dict[str, list[str]]
    protocol: str = ""
    stdin: bytes = b""
    resizes: list[dict[str, int]] = field(default_factory=list)


@dataclass(frozen=True)
class Event:
    version: int
    type: str  # ADDED, MODIFIED, DELETED
    kind: str
    namespace: str
    object: dict[str, Any]  # as it was at ``version``


@dataclass(frozen=True)
class Fault:
    status: int  # 0: drop the connection without an answer
    retry_after: str | None = None


class FakeCluster:
    """The state behind the server: objects, their history, logs, injected faults, a clock and
    a request log. ``lock`` is a condition the watches wait on."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}  # (kind, ns, name)
        self.nodes: list[dict[str, Any]] = []
        self.logs: dict[str, bytes] = {}
        self.created: list[dict[str, Any]] = []  # every manifest as posted
        self.requests: Counter[tuple[str, str]] = Counter()  # (method, path without query)
        self.faults: list[Fault] = []  # answers for the next calls
        self.create_fault: int | None = None  # a status every create answers while set
        self.execs: list[ExecRecord] = []  # every exec session opened, in order
        self.revision = 0  # the resourceVersion of the last change
        self.history: list[Event] = []  # changes after ``compacted``, oldest first
        self.versions: list[int] = []  # their versions, for bisecting
        self.compacted = 0  # a watch from before this version gets 410 Gone
        self.terminating: dict[tuple[str, str], float] = {}  # pod -> when its grace ends
        self.skew = 0.0  # seconds the fake's clock is ahead of the real one (``advance``)
        self.watch_breaks = 0  # bumped to break every open watch
        self.bookmarks = 0  # bumped to send every watch that asked for them a bookmark
        self.watching = 0  # watches open now
        self.watch_queries: list[dict[str, str]] = []  # the query of every watch asked for

    # -- what tests drive --------------------------------------------------------------------

    def fail_next(self, count: int, status: int = 429, retry_after: str | None = None) -> None:
        """Answer the next ``count`` calls with ``status`` (0: drop the connection), with a
        ``Retry-After`` header when given (the real server sends one with most 429s)."""
        with self.lock:
            self.faults.extend([Fault(status, retry_after)] * count)

    def now(self) -> float:
        return time.time() + self.skew

    def advance(self, seconds: float) -> None:
        """Move the fake's clock: pods whose grace period has passed go."""
        with self.lock:
            self.skew += seconds
            self.reap()

    def compact(self) -> None:
        """Forget the history up to now, as etcd's compaction does: a watch from an older
        version is answered 410 Gone."""
        with self.lock:
            self.history.clear()
            self.versions.clear()
            self.compacted = self.revision
            self.lock.notify_all()

    def break_watches(self) -> None:
        """Cut every open watch mid-stream (no clean end of the chunked body)."""
        with self.lock:
            self.watch_breaks += 1
            self.lock.notify_all()

    def bookmark(self) -> None:
        """Send a BOOKMARK to every watch that allows them (the real server does about once a
        minute): it carries the version the watch has caught up with."""
        with self.lock:
            self.bookmarks += 1
            self.lock.notify_all()

    def touch(self, kind: str = "configmaps", namespace: str = "kube-system") -> None:
        """A change nobody of the portal watches (another namespace): the version moves on."""
        with self.lock:
            name = f"other-{self.revision + 1}"
            obj = {"metadata": {"name": name, "namespace": namespace, "uid": str(uuid.uuid4())}}
            self.objects[(kind, namespace, name)] = obj
            self.record("ADDED", kind, namespace, obj)

    def pods(self, namespace: str = "default") -> dict[str, dict[str, Any]]:
        with self.lock:
            return {
                n: o for (k, ns, n), o in self.objects.items() if k == "pods" and ns == namespace
            }

    def set_status(self, name: str, status: dict[str, Any], namespace: str = "default") -> None:
        with self.lock:
            pod = self.objects[("pods", namespace, name)]
            pod["status"] = dict(status)
            if "nodeName" in status:
                pod["spec"]["nodeName"] = pod["status"].pop("nodeName")
            self.record("MODIFIED", "pods", namespace, pod)

    def put_pod(self, pod: dict[str, Any], namespace: str = "default") -> None:
        with self.lock:
            key = ("pods", namespace, pod["metadata"]["name"])
            kind = "MODIFIED" if key in self.objects else "ADDED"
            self.objects[key] = pod
            self.record(kind, "pods", namespace, pod)

    # -- what the server does ----------------------------------------------------------------

    def record(self, type_: str, kind: str, ns: str, obj: dict[str, Any]) -> None:
        """The next version for a change of ``obj`` (lock held); watches are woken."""
        self.revision += 1
        obj["metadata"]["resourceVersion"] = str(self.revision)
        self.history.append(Event(self.revision, type_, kind, ns, copy(obj)))
        self.versions.append(self.revision)
        self.lock.notify_all()

    def create(self, kind: str, ns: str, obj: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        name = (obj.get("metadata") or {}).get("name") or ""
        with self.lock:
            self.created.append(copy(obj))
            causes = validate(kind, obj)
            if causes:
                return 422, invalid(KINDS[kind], name, causes)
            if (kind, ns, name) in self.objects:
                return 409, status(409, "AlreadyExists", f'{kind} "{name}" already exists')
            meta = obj["metadata"]
            meta.update(
                namespace=ns, uid=str(uuid.uuid4()), creationTimestamp=timestamp(self.now())
            )
            if kind == "secrets":  # stored as data, as the real server does
                data = secret_data(obj)
                obj.pop("stringData", None)
                obj["data"] = {k: base64.b64encode(v).decode() for k, v in data.items()}
            if kind == "pods":
                obj["status"] = {"phase": "Pending"}
            self.objects[(kind, ns, name)] = obj
            self.record("ADDED", kind, ns, obj)
            return 201, obj

    def delete(
        self, kind: str, ns: str, name: str, grace: int | None = None
    ) -> dict[str, Any] | None:
        """Delete one object; a pod on a node that has not finished stays Terminating for its
        grace period (``grace``, else its spec's, else 30 s)."""
        with self.lock:
            obj = self.objects.get((kind, ns, name))
            if obj is None:
                return None
            if kind == "pods":
                spec, phase = obj.get("spec") or {}, (obj.get("status") or {}).get("phase")
                if grace is None:
                    grace = spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS)
                if spec.get("nodeName") and phase not in ("Succeeded", "Failed") and grace:
                    if (ns, name) not in self.terminating:
                        ends = self.now() + grace
                        self.terminating[(ns, name)] = ends
                        obj["metadata"]["deletionTimestamp"] = timestamp(ends)
                        obj["metadata"]["deletionGracePeriodSeconds"] = grace
                        self.record("MODIFIED", kind, ns, obj)
                    self.collect(obj["metadata"]["uid"])
                    return obj
            self.remove(kind, ns, name)
            return obj

    def remove(self, kind: str, ns: str, name: str) -> None:
        """The object is gone for good (lock held): DELETED, and its dependents follow."""
        obj = self.objects.pop((kind, ns, name), None)
        if kind == "pods":
            self.terminating.pop((ns, name), None)
        if obj is not None:
            self.record("DELETED", kind, ns, obj)
            self.collect(obj["metadata"]["uid"])

    def collect(self, uid: str) -> None:
        """Background propagation: dependents of a deleted owner are deleted too."""
        for (kind, ns, name), obj in list(self.objects.items()):
            owners = obj["metadata"].get("ownerReferences") or []
            if any(o["uid"] == uid for o in owners):
                self.delete(kind, ns, name)

    def reap(self) -> None:
        """Pods whose grace period has passed go (lock held)."""
        now = self.now()
        for (ns, name), ends in list(self.terminating.items()):
            if ends <= now:
                self.remove("pods", ns, name)

    def select(self, kind: str, ns: str, selector: str) -> list[dict[str, Any]]:
        requirements = parse_selector(selector)
        with self.lock:
            return [
                obj
                for (k, n, _), obj in self.objects.items()
                if k == kind
                and n == ns
                and selects(requirements, obj["metadata"].get("labels") or {})
            ]

    def events_after(self, version: int) -> list[Event]:
        """The changes after ``version`` (lock held)."""
        return self.history[bisect_right(self.versions, version) :]


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
            cluster.reap()
        if fault is None and method == "POST" and cluster.create_fault is not None:
            fault = Fault(cluster.create_fault)
        if fault is not None and fault.status == 0:
            self.close_connection = True  # no answer at all: the client sees a dropped connection
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if fault is not None:
            reason = REASONS.get(fault.status, "InternalError")
            body = status(fault.status, reason, "injected")
            self.send_json(fault.status, body, retry_after=fault.retry_after)
            return
        try:
            self.serve(method, url.path, query, payload)
        except SelectorError as exc:
            self.send_json(400, status(400, "BadRequest", str(exc)))

    def serve(self, method: str, path: str, query: dict[str, str], payload: Any) -> None:
        cluster = self.cluster
        if path == "/api/v1/nodes" and method == "GET":
            with cluster.lock:
                version = str(cluster.revision)
            self.send_json(200, {"kind": "NodeList", "apiVersion": "v1",
                                 "metadata": {"resourceVersion": version},
                                 "items": cluster.nodes})  # fmt: skip
            return
        match = _NAMESPACED.fullmatch(path)
        if not match or match.group(2) not in KINDS:
            self.send_json(404, status(404, "NotFound", path))
            return
        ns, kind, name, sub = match.groups()
        grace = query.get("gracePeriodSeconds", (payload or {}).get("gracePeriodSeconds"))
        grace = None if grace is None else int(grace)
        if sub == "exec":
            self.exec_session(ns, name)
        elif sub == "log":
            self.send_log(ns, name, query)
        elif method == "POST":
            self.send_json(*cluster.create(kind, ns, payload))
        elif method == "GET" and name:
            with cluster.lock:
                obj = cluster.objects.get((kind, ns, name))
            self.send_found(obj, kind, name)
        elif method == "GET" and query.get("watch") in ("true", "True", "1"):
            self.send_watch(kind, ns, query)
        elif method == "GET":
            selector = query.get("labelSelector", "")
            with cluster.lock:  # the items and the version they are at, in one consistent read
                items = [copy(obj) for obj in cluster.select(kind, ns, selector)]
                version = str(cluster.revision)
            meta = {"resourceVersion": version}
            self.send_json(200, {"kind": KINDS[kind] + "List", "apiVersion": "v1",
                                 "metadata": meta, "items": items})  # fmt: skip
        elif method == "DELETE" and name:
            self.send_found(cluster.delete(kind, ns, name, grace), kind, name)
        else:  # delete collection
            gone = cluster.select(kind, ns, query.get("labelSelector", ""))
            for obj in gone:
                cluster.delete(kind, ns, obj["metadata"]["name"], grace)
            self.send_json(200, {"kind": KINDS[kind] + "List", "apiVersion": "v1", "items": gone})

    def send_found(self, obj: dict[str, Any] | None, kind: str, name: str) -> None:
        if obj is None:
            self.send_json(404, status(404, "NotFound", f'{kind} "{name}" not found'))
        else:
            self.send_json(200, obj)

    # -- watch ---------------------------------------------------------------------------------

    def send_watch(self, kind: str, ns: str, query: dict[str, str]) -> None:
        """A watch: newline-separated JSON events in a chunked body, until ``timeoutSeconds``
        (default 30 minutes), a break, or an ERROR event that ends it."""
        cluster = self.cluster
        requirements = parse_selector(query.get("labelSelector", ""))
        bookmarks = query.get("allowWatchBookmarks") in ("true", "True", "1")
        deadline = time.monotonic() + float(query.get("timeoutSeconds") or 1800)
        asked = query.get("resourceVersion", "")

        def wanted(event: Event) -> bool:
            labels = event.object["metadata"].get("labels") or {}
            return event.kind == kind and event.namespace == ns and selects(requirements, labels)

        with cluster.lock:
            if asked in ("", "0"):  # from now on, with the objects there now as ADDED first
                position = cluster.revision
                there = cluster.select(kind, ns, query.get("labelSelector", ""))
                opening = [{"type": "ADDED", "object": copy(obj)} for obj in there]
            else:
                position, opening = int(asked), []
            breaks, marks = cluster.watch_breaks, cluster.bookmarks
            cluster.watching += 1
            cluster.watch_queries.append(query)
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for event in opening:
                self.send_chunk(event)
            while True:
                with cluster.lock:
                    while (
                        breaks == cluster.watch_breaks
                        and marks == cluster.bookmarks
                        and position >= cluster.compacted
                        and (not cluster.versions or cluster.versions[-1] <= position)
                        and time.monotonic() < deadline
                    ):
                        cluster.lock.wait(max(0.0, min(1.0, deadline - time.monotonic())))
                    if breaks != cluster.watch_breaks:
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)  # mid-stream, no last chunk
                        return
                    if position < cluster.compacted:
                        gone = f"too old resource version: {position} ({cluster.compacted})"
                        expired = status(410, "Expired", gone)
                        events = [{"type": "ERROR", "object": expired}]
                        position = -1
                    else:
                        events = [
                            {"type": e.type, "object": e.object}
                            for e in cluster.events_after(position)
                            if wanted(e)
                        ]
                        position = cluster.revision
                    mark = marks != cluster.bookmarks or time.monotonic() >= deadline
                    marks = cluster.bookmarks
                for event in events:
                    self.send_chunk(event)
                if position < 0:
                    break
                if mark and bookmarks:
                    meta = {"resourceVersion": str(position)}
                    self.send_chunk({"type": "BOOKMARK", "object": {
                        "kind": KINDS[kind], "apiVersion": "v1", "metadata": meta}})  # fmt: skip
                if time.monotonic() >= deadline:
                    break
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True  # the client went away
        finally:
            with cluster.lock:
                cluster.watching -= 1

    def send_chunk(self, event: dict[str, Any]) -> None:
        line = orjson.dumps(event) + b"\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
        self.wfile.flush()

    # -- logs and exec -------------------------------------------------------------------------

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

    def exec_refusal(self, ns: str, name: str) -> tuple[int, dict[str, Any] | str] | None:
        """Why the real server would refuse an exec into the pod's ``main`` container: the
        API server itself for a pod without a node or one that has finished, the kubelet for a
        container that is not running (yet); None when the exec may go ahead."""
        with self.cluster.lock:
            pod = self.cluster.objects.get(("pods", ns, name))
        if pod is None:
            return 404, status(404, "NotFound", f'pods "{name}" not found')
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        if not (pod.get("spec") or {}).get("nodeName"):
            return 400, status(400, "BadRequest", f"pod {name} does not have a host assigned")
        if phase in ("Succeeded", "Failed"):
            message = f"cannot exec into a container in a completed pod; current phase is {phase}"
            return 400, status(400, "BadRequest", message)
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        main = next((c for c in statuses if c.get("name") == "main"), {})
        if phase != "Running" or "running" not in (main.get("state") or {}):
            return 500, 'container not found ("main")'  # the kubelet's plain-text answer
        return None

    def exec_session(self, ns: str, name: str) -> None:
        """A WebSocket exec (channel.k8s.io) into a tiny shell with a tty: it prints a prompt,
        echoes what is typed, runs ``echo ...`` and ``exit`` lines (anything else is "not
        found"), and records the exec's query, its protocol, its stdin and every resize."""
        refused = self.exec_refusal(ns, name)
        if refused is not None:
            code, body = refused
            if isinstance(body, str):
                self.send_bytes(code, body.encode(), "text/plain")
            else:
                self.send_json(code, body)
            return
        offered = [p.strip() for p in self.headers.get("Sec-WebSocket-Protocol", "").split(",")]
        protocol = next((p for p in offered if p in CHANNEL_PROTOCOLS), "")
        if not protocol:
            message = f"unable to upgrade: no supported subprotocol in {offered}"
            self.send_json(400, status(400, "BadRequest", message))
            return
        key = self.headers.get("Sec-WebSocket-Key", "")
        accept = base64.b64encode(
            hashlib.sha1((key + _WS_GUID).encode(), usedforsecurity=False).digest()
        ).decode()
        session = ExecRecord(name, parse_qs(urlsplit(self.path).query), protocol)
        with self.cluster.lock:  # recorded before the client can see the session open
            self.cluster.execs.append(session)
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.send_header("Sec-WebSocket-Protocol", protocol)
        self.end_headers()
        self.close_connection = True
        prompt, line = f"{name}$ ".encode(), b""
        self.ws_send(1, prompt)
        while (frame := self.ws_receive()) is not None:
            channel, data = frame[:1], frame[1:]
            if channel == b"\x04":
                session.resizes.append(json.loads(data))
                continue
            if channel == b"\xff":  # v5: the client closed a channel (stdin)
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

    # -- answers -------------------------------------------------------------------------------

    def send_json(self, code: int, obj: Any, retry_after: str | None = None) -> None:
        extra = {"Retry-After": retry_after} if retry_after is not None else {}
        self.send_bytes(code, orjson.dumps(obj), "application/json", extra)

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
        cluster.break_watches()  # open watches end, so that their threads do
        server.shutdown()
        server.server_close()
