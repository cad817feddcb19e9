from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from jobs.access import job_for
from jobs.models import Job, Task
from jobs.states import LIVE_TASK_STATES
from jobs.tasklogs import LogResponse, read_task_log, task_log_chunks

STREAMS = ("stdout", "stderr")
FOLLOW_TAIL_BYTES = 32 * 1024


def task_of(job: Job, attempt: int, task: str, stream: str) -> Task:
    role, _, index = task.rpartition("-")
    if stream not in STREAMS or not index.isdigit() or len(index) > 9:
        raise Http404("no such log")
    row = Task.objects.filter(
        attempt__job=job, attempt__number=attempt, role=role, index=int(index)
    ).first()
    if row is None or not row.backend_ref:
        raise Http404("no such log")
    return row


@login_required
def download_log(
    request: HttpRequest, username: str, name: str, attempt: int, task: str, stream: str
) -> LogResponse:
    job = job_for(request.user, username, name)
    row = task_of(job, attempt, task, stream)
    chunks = task_log_chunks(job, row.backend_ref, stream)  # streamed: a log may be 1 GiB
    response = LogResponse(chunks)
    filename = f"{job.name}-a{attempt}-{task}.{stream}.log"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def tail_context(
    request: HttpRequest, username: str, name: str, attempt: int, task: str, stream: str
) -> dict[str, object]:
    job = job_for(request.user, username, name)
    row = task_of(job, attempt, task, stream)
    text = read_task_log(job, row.backend_ref, stream, FOLLOW_TAIL_BYTES)
    return {
        "job": job,
        "task": row,
        "attempt": attempt,
        "label": task,
        "stream": stream,
        "text": text.decode("utf-8", "replace"),
        "live": row.state in LIVE_TASK_STATES,
    }


@login_required
def view_log(
    request: HttpRequest, username: str, name: str, attempt: int, task: str, stream: str
) -> HttpResponse:
    """A page that follows the log's tail while the task lives (then it stops asking)."""
    context = tail_context(request, username, name, attempt, task, stream)
    return render(request, "jobs/log.html", context)


@login_required
def tail_log(
    request: HttpRequest, username: str, name: str, attempt: int, task: str, stream: str
) -> HttpResponse:
    context = tail_context(request, username, name, attempt, task, stream)
    return render(request, "jobs/_log_tail.html", context)
