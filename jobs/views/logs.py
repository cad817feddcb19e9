from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse

from clusters.registry import get_backend
from jobs.access import job_for
from jobs.models import Task

STREAMS = ("stdout", "stderr")


@login_required
def download_log(
    request: HttpRequest, username: str, name: str, attempt: int, task: str, stream: str
) -> HttpResponse:
    job = job_for(request.user, username, name)
    role, _, index = task.rpartition("-")
    if stream not in STREAMS or not index.isdigit():
        raise Http404("no such log")
    row = Task.objects.filter(
        attempt__job=job, attempt__number=attempt, role=role, index=int(index)
    ).first()
    if row is None or not row.backend_ref:
        raise Http404("no such log")
    body = get_backend().read_log(row.backend_ref, stream)
    response = HttpResponse(body, content_type="text/plain; charset=utf-8")
    filename = f"{job.name}-a{attempt}-{task}.{stream}.log"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
