from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from jobs.access import job_for
from jobs.models import Job, Task
from jobs.states import LIVE_TASK_STATES
from jobs.tasklogs import MAX_TAIL_BYTES, LogResponse, read_task_log, task_log_chunks

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


def tail_bytes(request: HttpRequest) -> int:
    """``?tail=``: how much of the log's end the page shows; the tail first, older parts on
    demand ("Load older" asks for four times as much), at most ``MAX_TAIL_BYTES``."""
    raw = request.GET.get("tail", "")
    if not raw.isdigit() or len(raw) > 9:
        return FOLLOW_TAIL_BYTES
    return min(max(int(raw), FOLLOW_TAIL_BYTES), MAX_TAIL_BYTES)


def tail_context(
    request: HttpRequest, username: str, name: str, attempt: int, task: str, stream: str
) -> dict[str, object]:
    job = job_for(request.user, username, name)
    row = task_of(job, attempt, task, stream)
    tail = tail_bytes(request)
    data = read_task_log(job, row.backend_ref, stream, tail)
    return {
        "job": job,
        "task": row,
        "attempt": attempt,
        "label": task,
        "stream": stream,
        "text": data.decode("utf-8", "replace"),
        "live": row.state in LIVE_TASK_STATES,
        "tail": tail,
        # the log is longer than what is shown: older parts can be asked for
        "older": tail * 4 if len(data) >= tail and tail < MAX_TAIL_BYTES else None,
    }


SEARCH_MAX_MATCHES = 500
SEARCH_MAX_CHARS = 200


@login_required
def search_log(
    request: HttpRequest, username: str, name: str, attempt: int, task: str, stream: str
) -> HttpResponse:
    """The lines of the whole log holding ``?q=`` (any case), with their numbers, read a chunk
    at a time with the job's secrets masked (at most ``SEARCH_MAX_MATCHES``)."""
    context = tail_context(request, username, name, attempt, task, stream)
    query = request.GET.get("q", "")
    if not query.strip() or len(query) > SEARCH_MAX_CHARS:
        context["search_error"] = f"q: 1 to {SEARCH_MAX_CHARS} characters to look for"
        return render(request, "jobs/log.html", context, status=400)
    job, row = context["job"], context["task"]
    assert isinstance(job, Job) and isinstance(row, Task)
    context.update(query=query, matches=matching_lines(job, row.backend_ref, stream, query))
    return render(request, "jobs/log.html", context)


def matching_lines(job: Job, ref: str, stream: str, query: str) -> list[tuple[int, str]]:
    wanted = query.casefold()
    found: list[tuple[int, str]] = []
    number, rest = 0, b""
    for chunk in task_log_chunks(job, ref, stream):
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        for line in lines:
            number += 1
            text = line.decode("utf-8", "replace")
            if wanted in text.casefold():
                found.append((number, text[:2000]))
                if len(found) >= SEARCH_MAX_MATCHES:
                    return found
    if rest and wanted in rest.decode("utf-8", "replace").casefold():
        found.append((number + 1, rest.decode("utf-8", "replace")[:2000]))
    return found


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
