from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from jobs.models import Job

PAGE_SIZE = 25


@login_required
def job_list(request: HttpRequest) -> HttpResponse:
    jobs = (
        Job.objects.filter(owner_id=request.user.pk)
        .select_related("owner", "virtual_cluster")
        .defer("protocol", "submitted_text")
        .order_by("-created_at", "-id")
    )
    page = Paginator(jobs, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "jobs/list.html", {"page": page})
