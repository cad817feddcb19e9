"""Watching the portal's pods: what changed, as it changes, without polling.

The list-then-watch of every Kubernetes controller (see "Efficient detection of changes" in the
API concepts): one list gives the pods and the ``resourceVersion`` it is at; a watch from that
version streams every change after it, newline-separated JSON events. The watch keeps the
version of the last event (or ``BOOKMARK``) it saw, so that after a broken connection or the
server's timeout it resumes where it stopped and loses nothing; when the server no longer holds
that version it lists again: the API server says so with a 200 answer whose one event is an
``ERROR`` holding a 410 ``Expired`` Status (its watch cache, kubernetes#25151), and may with an
HTTP 410 answer to the watch request (both are handled, as client-go's reflector does). That
batch is a *resync*: the whole current set, whatever happened in between.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from backends.base import BackendUnavailable
from backends.kubernetes.api import RetryPolicy, body, call, describe, retryable

log = logging.getLogger(__name__)
Pod = dict[str, Any]


class Expired(Exception):
    """The server no longer holds the version the watch asked for (410): list again."""


@dataclass(frozen=True)
class PodEvent:
    type: str  # ADDED, MODIFIED, DELETED, or LISTED for a pod of a (re)list
    pod: Pod


@dataclass(frozen=True)
class PodBatch:
    """Pod events that came together. ``resync``: the batch is a fresh list of every pod (the
    first one, or after a 410), so a pod missing from it is gone. A bookmark gives an empty
    batch: nothing changed, but the watch has caught up with ``version``."""

    events: list[PodEvent] = field(default_factory=list)
    resync: bool = False
    version: str = ""


class PodWatch:
    """List, then watch from the listed version, resuming after breaks and relisting on 410.

    Iterate ``batches()``; it runs until ``stop`` is set (checked between reads; a read waits
    at most ``timeout_seconds`` plus a margin, the server ending each watch by then).
    """

    def __init__(
        self,
        core: client.CoreV1Api,
        namespace: str,
        selector: str,
        retry: RetryPolicy,
        timeout_seconds: int = 240,
        stop: threading.Event | None = None,
    ) -> None:
        self.core = core
        self.namespace = namespace
        self.selector = selector
        self.retry = retry
        self.timeout_seconds = timeout_seconds
        self.stop = stop or threading.Event()
        self.version = ""  # of the last event or bookmark seen; "" before the first list
        self.lists = 0  # lists made: 1 + the relists after a 410
        self.resumes = 0  # watches started again from ``version`` after a break or timeout

    def batches(self) -> Iterator[PodBatch]:
        failures = 0
        while not self.stop.is_set():
            try:
                if not self.version:
                    yield self.relist()
                    if self.stop.is_set():
                        return
                for batch in self.stream():
                    failures = 0
                    yield batch
                    if self.stop.is_set():
                        return
            except Expired as exc:
                log.info("pod watch: %s; listing again", exc)
                self.version = ""
                continue
            except Exception as exc:
                # A list that outlasted its retries (KubernetesUnavailable) is waited out too:
                # the watcher outlives an API server outage instead of crash-looping.
                if not (retryable(exc) or isinstance(exc, BackendUnavailable)):
                    raise
                delay = self.retry.delay(failures)
                failures = min(failures + 1, 10)
                log.warning("pod watch broke (%s); resuming in %.2fs", describe(exc), delay)
                self.retry.sleep(delay)
            self.resumes += 1

    def relist(self) -> PodBatch:
        """Every pod of the portal and the version the list is at (retried like any call)."""
        response = call(
            self.retry,
            "list pods",
            self.core.list_namespaced_pod,
            self.namespace,
            label_selector=self.selector,
            _preload_content=False,
        )
        listing = body(response)
        self.version = str((listing.get("metadata") or {}).get("resourceVersion") or "")
        self.lists += 1
        events = [PodEvent("LISTED", pod) for pod in listing.get("items") or []]
        return PodBatch(events, resync=True, version=self.version)

    def stream(self) -> Iterator[PodBatch]:
        """One watch from ``version``: a batch per read of the stream, until the server ends
        it (its timeout: clean, the caller resumes) or it breaks (an exception)."""
        try:
            response: Any = self.core.list_namespaced_pod(
                self.namespace,
                label_selector=self.selector,
                watch=True,
                resource_version=self.version,
                allow_watch_bookmarks=True,
                timeout_seconds=self.timeout_seconds,
                _preload_content=False,
                _request_timeout=(10, self.timeout_seconds + 30),
            )
        except ApiException as exc:
            if exc.status == 410:
                raise Expired(describe(exc)) from exc
            raise
        try:
            yield from self.read(response)
        finally:
            response.release_conn()

    def read(self, response: Any) -> Iterator[PodBatch]:
        pending = b""
        for data in response.stream(amt=None, decode_content=False):
            pending += data
            *lines, pending = pending.split(b"\n")
            events = [self.event(orjson.loads(line)) for line in lines if line.strip()]
            if lines:
                yield PodBatch([e for e in events if e is not None], version=self.version)

    def event(self, event: dict[str, Any]) -> PodEvent | None:
        """A watch event as a pod change (None for a bookmark), the version moved on."""
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise Expired(obj.get("message") or "410 Gone")
            raise ApiException(status=obj.get("code") or 500, reason=obj.get("message") or "")
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if version:
            self.version = str(version)
        if kind == "BOOKMARK":
            return None
        return PodEvent(str(kind), obj)
