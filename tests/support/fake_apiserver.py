"""A Kubernetes API server on loopback, as strict as a real one where the portal depends on it,
for the backend's tests and the benchmarks.

It serves the REST paths the official client calls for core/v1 pods, services, configmaps and
secrets (create, read, list and watch with a label selector, delete, delete collection), nodes,
pod logs and pod exec (a tiny shell over the WebSocket stream), the metrics API's pod metrics
(metrics-server's ``PodMetricsList``, or its 404 when it is not installed), and behaves as the
real server:

- every change takes the next ``resourceVersion``; a list carries the version it is at, and a
  watch from a version sends every change after it (``ADDED``, ``MODIFIED``, ``DELETED``), with
  ``BOOKMARK`` events when asked (``allowWatchBookmarks``), and, for a watch started from a
  version older than the last compaction (``compact``), a 200 answer whose one event is an
  ``ERROR`` holding a 410 ``Expired`` Status, as the watch cache answers (an open watch goes on);
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

The state behind it, and what tests drive, is ``fake_cluster.FakeCluster``; the API's rules
(selectors, validation, Status bodies) are in ``k8s_rules``.
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
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

from tests.support.fake_cluster import KINDS, Event, ExecRecord, FakeCluster, Fault, copy
from tests.support.k8s_rules import SelectorError, parse_selector, selects, status

_POD_METRICS = re.compile(r"/apis/metrics\.k8s\.io/v1beta1/namespaces/([^/]+)/pods")
_NAMESPACED = re.compile(r"/api/v1/namespaces/([^/]+)/(\w+)(?:/([^/]+))?(?:/(log|exec))?")
_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
# What the server speaks, best first; it takes the first of the client's list it knows.
CHANNEL_PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io", "v3.channel.k8s.io",
                     "v2.channel.k8s.io", "channel.k8s.io")  # fmt: skip
REASONS = {400: "BadRequest", 403: "Forbidden", 404: "NotFound", 409: "AlreadyExists",
           410: "Expired", 422: "Invalid", 429: "TooManyRequests", 500: "InternalError",
           503: "ServiceUnavailable"}  # fmt: skip


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
        if (metrics := _POD_METRICS.fullmatch(path)) and method == "GET":
            self.send_pod_metrics(metrics.group(1), query.get("labelSelector", ""))
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

    def send_pod_metrics(self, ns: str, selector: str) -> None:
        """The metrics API's PodMetricsList; without metrics-server, the aggregator's 404."""
        cluster = self.cluster
        if not cluster.metrics_api:
            reason = "the server could not find the requested resource"
            self.send_json(404, status(404, "NotFound", reason))
            return
        with cluster.lock:
            items = cluster.pod_metrics(ns, selector)
        self.send_json(200, {"kind": "PodMetricsList", "apiVersion": "metrics.k8s.io/v1beta1",
                             "metadata": {}, "items": items})  # fmt: skip

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
                if position < cluster.compacted:  # the watch cache's errWatcher: 200, then this
                    gone = f"too old resource version: {position} ({cluster.compacted})"
                    opening = [{"type": "ERROR", "object": status(410, "Expired", gone)}]
                    position = -1
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
            while position >= 0:
                with cluster.lock:
                    while (
                        breaks == cluster.watch_breaks
                        and marks == cluster.bookmarks
                        and (not cluster.versions or cluster.versions[-1] <= position)
                        and time.monotonic() < deadline
                    ):
                        cluster.lock.wait(max(0.0, min(1.0, deadline - time.monotonic())))
                    if breaks != cluster.watch_breaks:
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)  # mid-stream, no last chunk
                        return
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
