"""Admin pages under /manage/ that show the jobs' use: the virtual clusters against their
guarantees, and the nodes with their live tasks. Admins only (others: 403); a virtual
cluster's settings and users are ``clusters.views.manage``'s."""

from __future__ import annotations

from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from backends.base import SupportsLimits
from clusters.capacity import total
from clusters.models import Node
from clusters.registry import get_backend
from clusters.resources import sum_of
from clusters.views.manage import admin_only
from jobs.models import Task
from jobs.states import LIVE_TASK_STATES
from jobs.vc_usage import overview


@admin_only
def vc_list(request: HttpRequest) -> HttpResponse:
    views, capacity = overview()
    return render(request, "clusters/manage_list.html", {"views": views, "capacity": capacity})


@admin_only
def nodes(request: HttpRequest) -> HttpResponse:
    rows = list(Node.objects.all())
    live = Task.objects.filter(state__in=LIVE_TASK_STATES).exclude(backend_ref="")
    by_node = {r["node"]: r["n"] for r in live.values("node").annotate(n=Count("id"))}
    for node in rows:
        node.live_tasks = by_node.get(node.name, 0)
    views, _ = overview()
    used = sum_of(held for view in views for held in (view.used, view.borrowed))
    context = {"nodes": rows, "capacity": total(rows), "used": used}
    backend = get_backend()
    if isinstance(backend, SupportsLimits):  # what the kernel holds tasks to on this host
        context["limits"], context["unlimited"] = backend.describe_limits(), backend.unlimited()
    return render(request, "clusters/manage_nodes.html", context)
