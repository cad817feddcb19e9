from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from jobs.access import job_for
from jobs.models import Task


@login_required
def task_terminal(request: HttpRequest, username: str, name: str, task_id: int) -> HttpResponse:
    job = job_for(request.user, username, name)
    task = Task.objects.filter(id=task_id, attempt__job=job).first()
    if task is None:
        raise Http404("no such task")
    context = {"job": job, "task": task, "ws_path": f"/ws/tasks/{task.id}/terminal/"}
    return render(request, "jobs/terminal.html", context)
