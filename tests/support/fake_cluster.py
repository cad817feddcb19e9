"""The state behind the fake Kubernetes API server (``fake_apiserver``): objects and their
history of ``resourceVersion``s, pods Terminating for their grace period, the garbage
collector, pod logs, injected faults, a clock the tests move, and a log of the requests.

Tests drive it directly (``fail_next``, ``advance``, ``compact``, ``break_watches``,
``set_status``, ...) and read what the portal did (``created``, ``requests``, ``execs``).
"""

from __future__ import annotations

import base64
import threading
import time
import uuid
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from tests.support.k8s_rules import invalid, parse_selector, secret_data, selects, status, validate

KINDS = {"pods": "Pod", "services": "Service", "configmaps": "ConfigMap", "secrets": "Secret"}
DEFAULT_GRACE_SECONDS = 30


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
        self.history: list[Event] = []  # every change, oldest first (open watches read it)
        self.versions: list[int] = []  # their versions, for bisecting
        self.compacted = 0  # a watch started from before this version gets 410 Gone
        self.terminating: dict[tuple[str, str], float] = {}  # pod -> when its grace ends
        self.skew = 0.0  # seconds the fake's clock is ahead of the real one (``advance``)
        self.watch_breaks = 0  # bumped to break every open watch
        self.bookmarks = 0  # bumped to send every watch that asked for them a bookmark
        self.watching = 0  # watches open now
        self.watch_queries: list[dict[str, str]] = []  # the query of every watch asked for
        # The metrics API (metrics-server): whether it is installed, and what each pod's
        # containers use as it last scraped them ((namespace, pod) -> container -> usage).
        self.metrics_api = True
        self.usage: dict[tuple[str, str], dict[str, dict[str, str]]] = {}

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
        """etcd's compaction, as the API server shows it: a watch *started* from a version
        before now gets an ERROR event holding 410 Expired (in a 200 stream, as the watch
        cache answers: kubernetes#25151). A watch already open goes on: the watch cache keeps
        the events it has not sent, so the history stays for it."""
        with self.lock:
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

    def set_usage(
        self, name: str, containers: dict[str, dict[str, str]], namespace: str = "default"
    ) -> None:
        """What metrics-server scraped of a pod's containers: ``{"main": {"cpu": "250m",
        "memory": "100Mi"}}``."""
        with self.lock:
            self.usage[(namespace, name)] = containers

    def pod_metrics(self, ns: str, selector: str) -> list[dict[str, Any]]:
        """PodMetrics as metrics-server lists them: only running pods it has scraped, with the
        pod's labels (a label selector works on them), cpu in nanocores, memory in Ki."""
        items = []
        for pod in self.select("pods", ns, selector):
            meta = pod["metadata"]
            scraped = self.usage.get((ns, meta["name"]))
            if scraped is None or (pod.get("status") or {}).get("phase") != "Running":
                continue
            items.append({
                "metadata": {"name": meta["name"], "namespace": ns,
                             "labels": meta.get("labels") or {},
                             "creationTimestamp": timestamp(self.now())},
                "timestamp": timestamp(self.now() - 5), "window": "10.5s",
                "containers": [{"name": container, "usage": usage}
                               for container, usage in scraped.items()],
            })  # fmt: skip
        return items

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
