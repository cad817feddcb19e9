"""The cluster's capacity as the backend reports it, cached in the Node table by beat."""

from __future__ import annotations

import functools
import logging
import socket
from typing import Any

import orjson
from django.db import transaction
from django.db.models import TextField
from django.db.models.functions import Cast

from backends.base import Backend, Capacity
from clusters import registry
from clusters.limits import Limit
from clusters.models import Node
from clusters.resources import Resources, sum_of

log = logging.getLogger(__name__)


def backend_nodes(backend: Backend) -> dict[str, Capacity]:
    """Per-node capacity when the backend lists nodes, else one node for the whole cluster."""
    lister: Any = getattr(backend, "nodes", None)
    if callable(lister):
        listed = lister()
        if isinstance(listed, dict):
            return dict(listed)
    name = "local" if backend.name == "local" else backend.name
    if backend.name == "local":
        name = socket.gethostname() or "local"
    return {name: backend.capacity()}


def refresh(backend: Backend) -> list[Node]:
    """Replace the cached nodes with what the backend reports now."""
    seen = backend_nodes(backend)
    with transaction.atomic():
        Node.objects.exclude(name__in=list(seen)).delete()
        for name, cap in seen.items():
            Node.objects.update_or_create(
                name=name,
                defaults={"cpu": cap.cpu, "memory_mb": cap.memory_mb, "gpus": dict(cap.gpus)},
            )
    return list(Node.objects.all())


def total(nodes: list[Node]) -> Resources:
    return sum_of(Resources(node.cpu, node.memory_mb, dict(node.gpus)) for node in nodes)


def node_capacities(backend: Backend | None = None) -> dict[str, Resources]:
    """Each cached node's capacity by name.

    With no node cached (a fresh install before beat's first refresh), the nodes are asked of
    ``backend`` (by default the configured one) and cached, so that quotas, submissions and
    admission are checked against the real cluster from the start. Only when the backend
    cannot say (it is unreachable) are the nodes unknown: an empty dict.
    """
    # Read as values, the GPUs as text decoded once per distinct text: every admission pass
    # reads every node (model instances and Django's JSON decoding: 6-14 ms of a pass at
    # 1,000 nodes, bench/admission.py; 1-2 ms so).
    rows = Node.objects.values_list("name", "cpu", "memory_mb", Cast("gpus", TextField()))
    read = {name: Resources(cpu, memory, gpus_of(text)) for name, cpu, memory, text in rows}
    if read:
        return read
    try:
        nodes = refresh(backend or registry.get_backend())
    except Exception:  # an unreachable cluster must not break pages or submissions
        log.warning("could not read the cluster's capacity from the backend", exc_info=True)
        return {}
    return {node.name: Resources(node.cpu, node.memory_mb, dict(node.gpus)) for node in nodes}


@functools.lru_cache(maxsize=256)
def gpus_of(text: str) -> dict[str, int]:
    """A node's GPUs from their stored text. Shared by the nodes of one kind: not to be
    changed (a ``Resources`` never is)."""
    return dict(orjson.loads(text))


def cluster_capacity(backend: Backend | None = None) -> Limit:
    """The summed capacity of the nodes (``node_capacities``); ``Limit()``, nothing limited,
    when they are unknown."""
    return summed(node_capacities(backend))


def summed(nodes: dict[str, Resources]) -> Limit:
    if not nodes:
        return Limit()
    return Limit.of(sum_of(nodes.values()))
