"""The cluster's capacity as the backend reports it, cached in the Node table by beat."""

from __future__ import annotations

import logging
import socket
from typing import Any

from django.db import transaction

from clusters import registry
from clusters.backends.base import Backend, Capacity
from clusters.models import Node
from clusters.quota import Limit, Resources

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
    result = Resources()
    for node in nodes:
        result = result + Resources(node.cpu, node.memory_mb, dict(node.gpus))
    return result


def cluster_capacity(backend: Backend | None = None) -> Limit:
    """The summed capacity of the cached nodes.

    With no node cached (a fresh install before beat's first refresh), the nodes are asked of
    ``backend`` (by default the configured one) and cached, so that quotas, submissions and
    admission are checked against the real cluster from the start. Only when the backend
    cannot say (it is unreachable) is the capacity unknown: ``Limit()``, nothing limited.
    """
    nodes = list(Node.objects.all())
    if not nodes:
        try:
            nodes = refresh(backend or registry.get_backend())
        except Exception:  # an unreachable cluster must not break pages or submissions
            log.warning("could not read the cluster's capacity from the backend", exc_info=True)
            return Limit()
    return Limit.of(total(nodes)) if nodes else Limit()
