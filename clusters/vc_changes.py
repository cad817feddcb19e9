"""Admin changes to virtual clusters, with the checks that keep them sound."""

from __future__ import annotations

import re

from django.db import transaction
from django.db.models import ProtectedError

from clusters.limits import Limit
from clusters.models import DEFAULT_VIRTUAL_CLUSTER, VirtualCluster
from clusters.overview import over_capacity

NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def quota_problems(name: str, quota: Limit, pk: int | None = None) -> list[str]:
    """Every reason the virtual cluster ``pk`` (None: new), named ``name``, may not have the
    guaranteed ``quota``; empty when it may."""
    if not NAME.fullmatch(name):
        return [f"name: {name!r} is not 1 to 64 letters, digits, '_' or '-'"]
    return over_capacity(pk, quota)


def delete(vc: VirtualCluster) -> str | None:
    """Delete ``vc``; None, or why it may not be. What becomes of its jobs is the jobs' own
    rule (``Job.virtual_cluster``'s on_delete: refused while one is live, finished ones move
    to ``default``)."""
    if vc.name == DEFAULT_VIRTUAL_CLUSTER:
        return "the default virtual cluster cannot be deleted"
    try:
        with transaction.atomic():
            vc.delete()
    except ProtectedError as refused:  # by the jobs still live in it
        live = len(refused.protected_objects)
        return f"virtual cluster '{vc.name}' has {live} live jobs; stop them or wait first"
    return None
