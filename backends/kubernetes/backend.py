"""Run tasks as pods on a Kubernetes cluster (``CLUSTER_BACKEND=kubernetes``).

A task's ref is ``<attempt key>/<pod name>``. Each task is reachable at the stable DNS name
``<role>-<index>.<service>`` of the attempt's headless Service (pod IPs are unknown before the
scheduler runs), so ``PAI_HOST_IP_*`` are DNS names here, and its ports are fixed per pod from
``port_base`` upward. The manifests live in ``manifests``, the pod-to-observation mapping in
``observe``, the retries in ``api``, the exec terminal in ``terminal``.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Collection, Iterator
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from backends.base import (
    LOG_CHUNK_BYTES,
    Capacity,
    Observation,
    Placement,
    TaskLaunch,
    TaskPhase,
    TaskShape,
    Usage,
    WatchedChanges,
)
from backends.kubernetes import manifests as m
from backends.kubernetes.api import (
    JSON,
    RetryPolicy,
    body,
    call,
    describe,
    server_message,
)
from backends.kubernetes.observe import (
    capacity_of,
    debug_keep_until,
    node_capacities,
    observe_pod,
    pod_usage,
)
from backends.kubernetes.terminal import SHELL_COMMAND, ExecSession, open_exec
from backends.kubernetes.watch import PodWatch

log = logging.getLogger(__name__)
_HOST = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
STREAMS = ("stdout", "stderr")
# ``observe`` reads pods one by one, instead of listing them all, when it is asked for at most
# this share of the pods the last list found: 1 task of 10,000 is one small read, not a list.
READ_BY_NAME_SHARE = 0.02


class KubernetesBackend:
    name = "kubernetes"

    def __init__(
        self,
        api_client: client.ApiClient,
        options: m.K8sOptions | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.api_client = api_client
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)  # the metrics API's pod metrics
        self._metrics_missing = False  # said once in the log, not every sample
        self.options = options or m.K8sOptions()
        self.retry = retry or RetryPolicy()
        self._roots: dict[str, str] = {}  # attempt key -> uid of its Service
        self._listed = 0  # pods the last list found

    @property
    def namespace(self) -> str:
        return self.options.namespace

    # -- placement and launch ---------------------------------------------------------------

    def place(self, attempt_key: str, shapes: list[TaskShape]) -> list[Placement]:
        service = m.service_name(attempt_key)
        roles = _role_labels({shape.role for shape in shapes})
        placements = []
        for shape in shapes:
            port, ports = self.options.port_base, {}
            for label, count in shape.port_counts.items():
                ports[label] = list(range(port, port + count))
                port += count
            placements.append(Placement(f"{roles[shape.role]}-{shape.index}.{service}", ports))
        return placements

    def launch(self, task: TaskLaunch) -> str:
        host = task.placement.ip.split(".", 1)[0]
        if not _HOST.fullmatch(host):
            host = m.dns_label(f"{task.role}-{task.index}")
        m.pod(task, host, "", self.options)  # LaunchRefused (e.g. a storage) before creating
        uid = self._root(task.attempt_key)
        name = m.pod_name(task.attempt_key, host, task.retry)
        self._create("secrets", m.script_secret(task, name, uid))
        if task.pull_secret:
            self._create("secrets", m.pull_secret(task, uid))
        self._create("pods", m.pod(task, host, uid, self.options))
        return f"{task.attempt_key}/{name}"

    def _root(self, attempt_key: str) -> str:
        """The uid of the attempt's Service, created on the first launch."""
        if attempt_key not in self._roots:
            name = m.service_name(attempt_key)
            created = self._create("services", m.service(attempt_key))
            if created is None:  # it was there already
                read = self.core.read_namespaced_service
                created = body(
                    self._call("read service", read, name, self.namespace, _preload_content=False)
                )
            self._roots[attempt_key] = created["metadata"]["uid"]
        return self._roots[attempt_key]

    def _create(self, kind: str, manifest: m.Manifest) -> Any:
        """Create ``manifest``; None when an object of that name exists (a repeated launch)."""
        create = getattr(self.core, f"create_namespaced_{_SINGULAR[kind]}")
        what = f"create {kind} {manifest['metadata']['name']}"
        try:
            response = self._call(
                what, create, self.namespace, manifest, _preload_content=False, _content_type=JSON
            )
        except ApiException as exc:
            if exc.status == 409:
                return None
            if exc.status == 422:  # the server's validation: the task cannot run as asked
                refused = f"the cluster refused the {_SINGULAR[kind]}: {server_message(exc)}"
                raise m.LaunchRefused(refused) from exc
            raise
        return body(response)

    # -- observation and control ------------------------------------------------------------

    def list_pods(self) -> dict[str, dict[str, Any]]:
        """Every pod of the portal in the namespace, by name: one list call."""
        response = self._call(
            "list pods",
            self.core.list_namespaced_pod,
            self.namespace,
            label_selector=m.SELECTOR,
            _preload_content=False,
        )
        return {pod["metadata"]["name"]: pod for pod in body(response).get("items") or []}

    def observe(self, refs: list[str]) -> dict[str, Observation]:
        """One list of the portal's pods, or, when ``refs`` are a small share of the pods the
        last list found (a wake-up for the few tasks that changed), a read of each by name:
        the work follows what is asked, not the size of the cluster."""
        if not refs:
            return {}
        if len(refs) <= self._listed * READ_BY_NAME_SHARE:
            pods = self._read_pods([ref.rpartition("/")[2] for ref in refs])
        else:
            pods = self.list_pods()
            self._listed = len(pods)
        seen = {}
        now = datetime.now(UTC)
        timeout = self.options.image_pull_timeout_seconds
        for ref in refs:
            name = ref.rpartition("/")[2]
            pod = pods.get(name)
            if pod is None:
                seen[ref] = Observation(ref, TaskPhase.GONE)
                continue
            seen[ref] = observe_pod(ref, pod, timeout, now)
            if (
                seen[ref].phase == TaskPhase.FAILED
                and (pod.get("status") or {}).get("phase", "Pending") == "Pending"
            ):
                self._give_up(name)
        return seen

    def usage(self, refs: list[str]) -> dict[str, Usage]:
        """What each running pod of ``refs`` uses, from the metrics API (metrics-server, what
        ``kubectl top`` reads): one list of the portal's pods' metrics (``SupportsUsage``).
        A cluster without it answers 404: no figures, said once in the log."""
        if not refs:
            return {}
        try:
            response = self._call(
                "list pod metrics",
                self.custom.list_namespaced_custom_object,
                "metrics.k8s.io",
                "v1beta1",
                self.namespace,
                "pods",
                label_selector=m.SELECTOR,
                _preload_content=False,
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
            if not self._metrics_missing:
                log.warning("no metrics API (metrics-server) in the cluster: no task usage")
            self._metrics_missing = True
            return {}
        self._metrics_missing = False
        items = body(response).get("items") or []
        by_name = {item["metadata"]["name"]: item for item in items}
        return {
            ref: pod_usage(by_name[name])
            for ref in refs
            if (name := ref.rpartition("/")[2]) in by_name
        }

    def pod_watch(self, stop: threading.Event | None = None) -> PodWatch:
        """A list-then-watch of the portal's pods (``watch.PodWatch``)."""
        return PodWatch(self.core, self.namespace, m.SELECTOR, self.retry, stop=stop)

    def watch(self, stop: threading.Event | None = None) -> Iterator[WatchedChanges]:
        """The pods' changes as task observations, as they happen (``base.SupportsWatch``):
        a deleted pod's task is GONE; the first batch, and the one after a relist, holds every
        pod (``resync``). Runs until ``stop`` is set."""
        timeout = self.options.image_pull_timeout_seconds
        for batch in self.pod_watch(stop).batches():
            now = datetime.now(UTC)
            seen = {}
            for event in batch.events:
                meta = event.pod.get("metadata") or {}
                attempt_key = (meta.get("labels") or {}).get(m.ATTEMPT)
                if not attempt_key:
                    continue
                ref = f"{attempt_key}/{meta.get('name')}"
                if event.type == "DELETED":
                    seen[ref] = Observation(ref, TaskPhase.GONE)
                else:
                    seen[ref] = observe_pod(ref, event.pod, timeout, now)
            yield WatchedChanges(seen, resync=batch.resync)

    def _read_pods(self, names: list[str]) -> dict[str, dict[str, Any]]:
        """The portal's pods of these names (one read each); those gone are left out."""
        pods = {}
        for name in names:
            try:
                response = self._call(
                    f"read pod {name}",
                    self.core.read_namespaced_pod,
                    name,
                    self.namespace,
                    _preload_content=False,
                )
            except ApiException as exc:
                if exc.status == 404:
                    continue
                raise
            pod = body(response)
            if (pod["metadata"].get("labels") or {}).get(m.MANAGED_BY) == m.MANAGER:
                pods[name] = pod
        return pods

    def _give_up(self, name: str) -> None:
        """Delete a pending pod whose task failed (its image never came), so that it holds
        no node's resources while the job retries or ends; a failure here is only logged."""
        try:
            self._delete("pod", name)
        except Exception as exc:
            log.warning("could not delete the failed pod %s: %s", name, describe(exc))

    def stop(self, refs: list[str]) -> None:
        """Delete the attempts of ``refs`` (the lifecycle stops an attempt's tasks together),
        but for the failed pods of debug jobs still within their keep time."""
        keys = sorted({ref.partition("/")[0] for ref in refs if "/" in ref})
        if not keys:
            return
        pods = self.list_pods()
        for attempt_key in keys:
            self.delete_attempt(attempt_key, pods)

    def delete_attempt(
        self, attempt_key: str, pods: dict[str, dict[str, Any]] | None = None
    ) -> None:
        """Delete the attempt's Service (its dependents follow) and its pods right away. When
        ``pods`` (the listing) holds failed pods of a debug job still to keep, only the other
        pods and their Secrets go; the Service stays as the kept pods' owner."""
        self._roots.pop(attempt_key, None)
        mine = {
            name: pod
            for name, pod in (pods or {}).items()
            if (pod["metadata"].get("labels") or {}).get(m.ATTEMPT) == attempt_key
        }
        now = datetime.now(UTC)
        kept = {
            name
            for name, pod in mine.items()
            if (until := debug_keep_until(pod, m.DEBUG_KEEP_HOURS)) and until > now
        }
        if kept:
            for name in sorted(set(mine) - kept):
                for kind in ("pod", "secret"):
                    self._delete(kind, name)
            return
        try:
            self._call(
                f"delete service of {attempt_key}",
                self.core.delete_namespaced_service,
                m.service_name(attempt_key),
                self.namespace,
                propagation_policy="Background",
                _preload_content=False,
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
        selector = f"{m.SELECTOR},{m.ATTEMPT}={attempt_key}"
        for kind in ("pod", "secret"):
            self._call(
                f"delete {kind}s of {attempt_key}",
                getattr(self.core, f"delete_collection_namespaced_{kind}"),
                self.namespace,
                label_selector=selector,
                _preload_content=False,
            )

    def _delete(self, kind: str, name: str) -> None:
        """Delete one object; one that is gone already is fine."""
        try:
            self._call(
                f"delete {kind} {name}",
                getattr(self.core, f"delete_namespaced_{kind}"),
                name,
                self.namespace,
                _preload_content=False,
            )
        except ApiException as exc:
            if exc.status != 404:
                raise

    def cleanup(self, keep_attempt_keys: Collection[str]) -> list[str]:
        """Delete the objects of every attempt not in ``keep_attempt_keys`` (see
        ``base.SupportsCleanup``), but for failed pods of debug jobs within their keep time
        (annotation ``gpu-portal/debug-keep-hours``); return the keys of those attempts."""
        live, stale = set(keep_attempt_keys), set()
        pods: dict[str, dict[str, Any]] = {}
        for kind in ("pod", "service", "secret"):
            response = self._call(
                f"list {kind}s",
                getattr(self.core, f"list_namespaced_{kind}"),
                self.namespace,
                label_selector=m.SELECTOR,
                _preload_content=False,
            )
            for item in body(response).get("items") or []:
                if kind == "pod":
                    pods[item["metadata"]["name"]] = item
                key = (item["metadata"].get("labels") or {}).get(m.ATTEMPT)
                if key and key not in live:
                    stale.add(key)
        for key in sorted(stale):
            self.delete_attempt(key, pods)
        return sorted(stale)

    # -- logs, terminal, capacity -----------------------------------------------------------

    def read_log(self, ref: str, stream: str, tail_bytes: int | None = None) -> bytes:
        """The pod's log. Kubernetes interleaves stdout and stderr: both come as ``stdout``."""
        if stream not in STREAMS:
            raise ValueError(f"stream must be one of {STREAMS}, not {stream!r}")
        if tail_bytes is not None and tail_bytes < 0:
            raise ValueError("tail_bytes must not be negative")
        if stream == "stderr" or tail_bytes == 0:
            return b""
        if tail_bytes is None:
            return self._log(ref, None)
        # Ask for few lines first; a line holds at least one byte, so the second ask suffices.
        lines = tail_bytes // 64 + 1
        data = self._log(ref, lines)
        if len(data) < tail_bytes and data.count(b"\n") >= lines:
            data = self._log(ref, tail_bytes)
        return data[-tail_bytes:]

    def read_log_head(self, ref: str, stream: str, head_bytes: int) -> bytes:
        """The start of the pod's log (``limitBytes``); stderr is in it, as ``stdout``."""
        if stream not in STREAMS:
            raise ValueError(f"stream must be one of {STREAMS}, not {stream!r}")
        if stream == "stderr" or head_bytes <= 0:
            return b""
        return self._log(ref, None, limit_bytes=head_bytes)[:head_bytes]

    def _log(self, ref: str, tail_lines: int | None, limit_bytes: int | None = None) -> bytes:
        response = self._log_response(ref, tail_lines=tail_lines, limit_bytes=limit_bytes)
        return b"" if response is None else bytes(response.data)

    def _log_response(self, ref: str, **query: Any) -> Any:
        """The pod log's unread response (``_preload_content=False``); None when the pod has
        not started yet or is gone."""
        try:
            return self._call(
                f"log of {ref}",
                self.core.read_namespaced_pod_log,
                ref.rpartition("/")[2],
                self.namespace,
                container="main",
                _preload_content=False,
                **query,
            )
        except ApiException as exc:
            if exc.status in (400, 404):  # not started yet, or gone
                return None
            raise

    def log_chunks(
        self, ref: str, stream: str, chunk_bytes: int = LOG_CHUNK_BYTES
    ) -> Iterator[bytes]:
        """The pod's log streamed from the API server (not loaded whole); Kubernetes
        interleaves stdout and stderr: both come as ``stdout``."""
        if stream not in STREAMS:
            raise ValueError(f"stream must be one of {STREAMS}, not {stream!r}")
        response = None if stream == "stderr" else self._log_response(ref)
        if response is None:
            return iter(())
        return _streamed(response, chunk_bytes)

    def shell(self, ref: str) -> ExecSession | None:
        """An interactive shell in the task's container (a pod exec stream with a tty, in
        ``$PAI_WORK_DIR`` with the task's environment); None when it cannot be opened (the pod
        is gone or not running)."""
        try:
            return ExecSession(self.open_exec(ref, SHELL_COMMAND))
        except Exception as exc:  # the handshake failed: no terminal, and the consumer says so
            log.warning("no terminal into %s: %s", ref, server_message(exc))
            return None

    def open_exec(self, ref: str, command: list[str], tty: bool = True) -> Any:
        """A live exec session in the task's container (``kubernetes.stream.ws_client.WSClient``
        in binary mode): ``write_stdin``, ``read_channel``, ``update``, ``is_open``, ``close``."""
        return open_exec(self.api_client, self.namespace, ref.rpartition("/")[2], command, tty)

    def capacity(self) -> Capacity:
        return capacity_of(self._nodes(), *self._node_terms())

    def nodes(self) -> dict[str, Capacity]:
        """Each node jobs may use (schedulable, matching ``K8S_NODE_SELECTOR``) by name: its
        allocatable cpu, memory and GPUs by the type its label names (``SupportsNodes``)."""
        return node_capacities(self._nodes(), *self._node_terms())

    def _nodes(self) -> list[dict[str, Any]]:
        response = self._call("list nodes", self.core.list_node, _preload_content=False)
        return list(body(response).get("items") or [])

    def _node_terms(self) -> tuple[str, str, dict[str, str]]:
        options = self.options
        return options.gpu_resource, options.gpu_type_label, options.node_selector

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return call(self.retry, what, fn, *args, **kwargs)


_SINGULAR = {
    "pods": "pod",
    "services": "service",
    "secrets": "secret",
}


def _role_labels(roles: set[str]) -> dict[str, str]:
    """Each role as a DNS label of at most 20 characters, distinct within the attempt."""
    plain = {role: m.dns_label(role, 20) for role in roles}
    simple = {role: re.sub(r"[^a-z0-9-]+", "-", role.lower()).strip("-")[:20] for role in roles}
    out = {}
    for role in roles:
        clash = sum(1 for other in roles if simple[other] == simple[role]) > 1
        out[role] = plain[role] if clash or not simple[role] else simple[role].rstrip("-")
    return out


def _streamed(response: Any, chunk_bytes: int) -> Iterator[bytes]:
    """An unread urllib3 response's body in chunks; its connection released at the end."""
    try:
        yield from response.stream(chunk_bytes)
    finally:
        response.release_conn()
