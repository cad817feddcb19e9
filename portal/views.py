"""Home: my jobs by state, my recent jobs, the use of my virtual clusters."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from clusters.models import VirtualCluster
from jobs.models import Job
from jobs.states import JobState
from jobs.vc_usage import overview

RECENT = 10


@login_required
def home(request: HttpRequest) -> HttpResponse:
    mine = Job.objects.filter(owner_id=request.user.pk)
    counts = dict(mine.order_by().values_list("state").annotate(n=Count("id")))
    recent = (
        mine.select_related("owner", "virtual_cluster")
        .only(
            "name",
            "state",
            "reason",
            "created_at",
            "started_at",
            "completed_at",
            "owner__username",
            "virtual_cluster__name",
        )  # fmt: skip
        .order_by("-created_at", "-id")[:RECENT]
    )
    names = list(VirtualCluster.objects.usable_by(request.user).values_list("name", flat=True))
    views, capacity = overview(names)
    context = {
        "by_state": [(state, counts.get(state, 0)) for state in JobState.values],
        "total": sum(counts.values()),
        "recent": recent,
        "vc_rows": [(v, v.bars(capacity)) for v in sorted(views, key=lambda v: v.vc.name)],
    }
    return render(request, "home.html", context)
