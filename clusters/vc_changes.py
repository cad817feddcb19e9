"""Admin changes to virtual clusters, with the checks that keep them sound."""

from __future__ import annotations

import re

from django.db import transaction

from clusters.models import DEFAULT_VIRTUAL_CLUSTER, VirtualCluster
from clusters.overview import over_capacity
from clusters.quota import Limit
from jobs.models import Job
from jobs.states import LIVE_JOB_STATES

NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def quota_problems(name: str, quota: Limit, pk: int | None = None) -> list[str]:
    """Every reason the virtual cluster ``pk`` (None: new), named ``name``, may not have the
    guaranteed ``quota``; empty when it may."""
    if not NAME.fullmatch(name):
        return [f"name: {name!r} is not 1 to 64 letters, digits, '_' or '-'"]
    return over_capacity(pk, quota)


def delete_problem(vc: VirtualCluster) -> str | None:
    if vc.name == DEFAULT_VIRTUAL_CLUSTER:
        return "the default virtual cluster cannot be deleted"
    live = Job.objects.filter(virtual_cluster=vc, state__in=LIVE_JOB_STATES).count()
    if live:
        return f"virtual cluster '{vc.name}' has {live} live jobs; stop them or wait first"
    return None


def delete(vc: VirtualCluster) -> None:
    """Delete ``vc``; its finished jobs move to ``default`` so their history stays."""
    with transaction.atomic():
        default = VirtualCluster.objects.named(DEFAULT_VIRTUAL_CLUSTER)
        Job.objects.filter(virtual_cluster=vc).update(virtual_cluster=default)
        vc.delete()
