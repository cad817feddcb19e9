"""How jobs use each virtual cluster now: the clusters app says what a VC guarantees and
holds, the jobs app how much of it its jobs use (issue 30: clusters imports nothing of jobs)."""

from __future__ import annotations

from clusters.capacity import cluster_capacity
from clusters.demand import resources_of
from clusters.limits import Limit
from clusters.models import VirtualCluster
from clusters.overview import VCView, unmet
from clusters.quota import quota_of, unguaranteed
from jobs.models import Job
from jobs.states import JobState


def overview(names: list[str] | None = None) -> tuple[list[VCView], Limit]:
    """Every virtual cluster (or those named) with its use; three queries in all (every VC is
    read: the rest no VC guarantees depends on them all)."""
    capacity = cluster_capacity()
    every = list(VirtualCluster.objects.all())
    quotas = {vc.name: quota_of(vc) for vc in every}
    shared = unguaranteed(quotas.values(), capacity)
    lacking = unmet(quotas, capacity)
    views = {
        vc.id: VCView(vc, quotas[vc.name], shared=shared, unmet=lacking.get(vc.name, []))
        for vc in every
        if names is None or vc.name in names
    }
    live = Job.objects.filter(
        virtual_cluster_id__in=list(views),
        state__in=[JobState.WAITING, JobState.RUNNING, JobState.STOPPING],
    ).values("virtual_cluster_id", "state", "resources", "borrowing")
    for row in live:
        view = views[row["virtual_cluster_id"]]
        if row["state"] == JobState.WAITING:
            view.waiting += 1
            continue
        view.running += 1
        need = resources_of(row["resources"])
        if row["borrowing"]:
            view.borrowed = view.borrowed + need
        else:
            view.used = view.used + need
    return list(views.values()), capacity
