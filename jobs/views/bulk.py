"""Stop several jobs from the list at once: owners and admins only (others' ids are ignored)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from jobs import lifecycle
from jobs.access import visible_jobs

MAX_STOP = 500


@login_required
@require_POST
def stop_jobs(request: HttpRequest) -> HttpResponse:
    ids = [int(i) for i in request.POST.getlist("job") if i.isdigit()][:MAX_STOP]
    stopped = 0
    for job in visible_jobs(request.user).filter(id__in=ids).select_related("owner"):
        stopped += lifecycle.stop(job, request.user)
    skipped = len(ids) - stopped
    note = f" ({skipped} not stoppable or not yours)" if skipped else ""
    messages.info(request, f"Stopping {stopped} job{'s' if stopped != 1 else ''}{note}.")
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, {request.get_host()}):
        back = ""
    return redirect(back or "jobs:list")
