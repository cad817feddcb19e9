"""The cluster at a glance (issue 28): its nodes with what is used and free of each, the
totals per GPU type, and each virtual cluster's use against its guarantee with its queue.

For every signed-in user, as OpenPAI's home page shows every user the cluster's totals and
the virtual clusters' use (microsoft/pai ``src/webportal/src/app/home/home/``). A user sees
only the virtual clusters they may use (``usable_by``; admins: all) and no job of anybody:
the nodes and totals are numbers only.

Under each virtual cluster, its use over the last day against its guarantee (``clusters.usage``
charts, SVG drawn here).

A constant number of queries whatever the number of nodes, jobs and samples: the nodes, the live
tasks placed on a node, the protocols of their jobs, ``overview``'s three and the samples of
the shown virtual clusters (one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from clusters.capacity import total
from clusters.demand import demand_of
from clusters.models import Node, VirtualCluster
from clusters.resources import ANY_GPU, Resources, sum_of
from clusters.usage import charts
from jobs.models import Job, Task
from jobs.states import LIVE_TASK_STATES, JobState
from jobs.vc_usage import overview


@dataclass
class GPUCount:
    kind: str  # "" = a GPU asked for without a type, on a node with several types
    used: int
    total: int

    @property
    def free(self) -> int:
        return max(self.total - self.used, 0)


@dataclass
class Row:
    """A node, or one line of the totals: its capacity and what live tasks hold of it."""

    name: str
    capacity: Resources
    used: Resources

    @property
    def free(self) -> Resources:
        left = self.capacity - self.used
        return Resources(max(left.cpu, 0), max(left.memory_mb, 0))

    @property
    def gpus(self) -> list[GPUCount]:
        kinds = sorted(set(self.capacity.gpus) | {k for k, n in self.used.gpus.items() if n})
        return [GPUCount(k, self.used.gpus.get(k, 0), self.capacity.gpus.get(k, 0)) for k in kinds]


def per_instance(protocol: dict[str, Any], role: str) -> Resources:
    """What one instance of ``role`` holds: ``demand_of`` a job of that role alone, once."""
    spec = dict(protocol["taskRoles"][role], instances=1)
    return demand_of({**protocol, "taskRoles": {role: spec}})


def node_use(nodes: list[Node]) -> dict[str, Resources]:
    """What the live tasks of running jobs hold on each node (by the node the backend placed
    them on): each its role's ``resourcePerInstance``. A GPU asked for without a type counts
    as the node's type when the node has only one. Two queries, whatever the number of tasks.
    """
    placed = list(
        Task.objects.filter(
            state__in=LIVE_TASK_STATES,
            attempt__job__state__in=[JobState.RUNNING, JobState.STOPPING],
        )
        .exclude(node="")
        .values_list("node", "role", "attempt__job_id")
    )
    protocols = dict(
        Job.objects.filter(id__in={job for _, _, job in placed}).values_list("id", "protocol")
    )
    only_type = {n.name: next(iter(n.gpus)) for n in nodes if len(n.gpus) == 1}
    use: dict[str, Resources] = {}
    for node, role, job in placed:
        held = per_instance(protocols[job], role)
        if ANY_GPU in held.gpus and node in only_type:
            gpus = dict(held.gpus)
            kind = only_type[node]
            gpus[kind] = gpus.get(kind, 0) + gpus.pop(ANY_GPU)
            held = Resources(held.cpu, held.memory_mb, gpus)
        use[node] = use.get(node, Resources()) + held
    return use


def gpu_totals(rows: list[Row]) -> list[GPUCount]:
    """Per GPU type over all nodes: how many, used and free."""
    summed: dict[str, GPUCount] = {}
    for row in rows:
        for count in row.gpus:
            line = summed.setdefault(count.kind, GPUCount(count.kind, 0, 0))
            line.used, line.total = line.used + count.used, line.total + count.total
    return [summed[k] for k in sorted(summed)]


@login_required
def cluster(request: HttpRequest) -> HttpResponse:
    nodes = list(Node.objects.all())
    use = node_use(nodes)
    rows = [Row(n.name, total([n]), use.pop(n.name, Resources())) for n in nodes]
    # Tasks on a node that the last refresh did not list (it left, or beat has not seen it).
    rows += [Row(name, Resources(), held) for name, held in sorted(use.items())]
    views, capacity = overview()
    running = sum_of(held for view in views for held in (view.used, view.borrowed))
    usable = set(VirtualCluster.objects.usable_by(request.user).values_list("id", flat=True))
    shown = [v for v in views if v.vc.id in usable]
    history = charts(shown)
    context = {
        "nodes": rows,
        "everything": Row("all nodes", total(nodes), sum((r.used for r in rows), Resources())),
        "gpu_totals": gpu_totals(rows),
        "running": running,
        "vcs": [(v, v.bars(capacity), history[v.vc.id]) for v in shown],
    }
    return render(request, "clusters/cluster.html", context)
