"""Virtual clusters as users see them: use against guarantees, queues in order, members.

A user sees the virtual clusters they may submit to (``usable_by``: open to all, a member, in
a member group; admins see all); any other answers 404, as if it did not exist."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from clusters.models import VirtualCluster
from clusters.usage import charts
from jobs.access import listable_jobs
from jobs.states import JobState
from jobs.vc_usage import overview


@login_required
def vc_list(request: HttpRequest) -> HttpResponse:
    views, capacity = overview()
    usable = set(VirtualCluster.objects.usable_by(request.user).values_list("id", flat=True))
    rows = [(v, v.bars(capacity)) for v in views if v.vc.id in usable]
    return render(request, "clusters/list.html", {"rows": rows, "capacity": capacity})


@login_required
def vc_detail(request: HttpRequest, name: str) -> HttpResponse:
    views, capacity = overview([name])
    if not views or not views[0].vc.usable_by(request.user):
        raise Http404(f"no virtual cluster {name}")
    view = views[0]
    # The jobs this user may list (only their own with JOBS_PRIVATE, jobs.access).
    jobs = listable_jobs(request.user).filter(virtual_cluster=view.vc).select_related("owner")
    jobs = jobs.defer("protocol", "submitted_text")
    queue = jobs.filter(state=JobState.WAITING).order_by(
        "queue_position", "-priority", "created_at", "id"
    )
    running = jobs.filter(state__in=[JobState.RUNNING, JobState.STOPPING]).order_by("started_at")
    context = {
        "view": view,
        "bars": view.bars(capacity),
        "usage": charts([view])[view.vc.id],
        "queue": queue[:200],
        "running": running[:200],
        "members": view.vc.members.order_by("username"),
        "groups": view.vc.groups.order_by("name"),
    }
    return render(request, "clusters/detail.html", context)
