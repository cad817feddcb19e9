from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from backends.base import SupportsLimits, SupportsRunAs
from clusters.registry import get_backend
from jobs import lifecycle
from jobs.access import job_for, job_view_for, summary_reason
from jobs.models import Job, JobAttempt, Task
from jobs.runtime.notes import runtime_notes
from jobs.states import TaskState
from jobs.tasklogs import read_task_log
from jobs.views.tasks import port_links, ssh_panel
from protocol import dump_yaml, mask_secrets

LOG_TAIL_BYTES = 4096
LOG_TAIL_TASKS = 8
STREAMS = ("stdout", "stderr")


def live_context(request: HttpRequest, job: Job) -> dict[str, object]:
    attempts = list(JobAttempt.objects.filter(job=job).order_by("number"))
    chosen = request.GET.get("attempt")
    attempt = next((a for a in attempts if str(a.number) == chosen), None)
    latest = attempts[-1] if attempts else None
    # The live part follows the newest attempt (a job retry adds one) unless an older one was
    # chosen: then it is ``pinned`` and stays.
    pinned = attempt if attempt is not None and attempt != latest else None
    attempt = attempt or latest
    tasks = list(attempt.tasks.order_by("role", "index")) if attempt else []
    for task in tasks:
        task.label = f"{task.role}-{task.index}"
        task.port_links = port_links(task)
    tailed = tail_logs(tasks, job)
    context: dict[str, object] = {
        "job": job,
        "attempts": attempts,
        "attempt": attempt,
        "pinned": pinned,
        "tasks": tasks,
        "tailed": tailed,
        "untailed": [t for t in tasks if t.backend_ref and t not in tailed],
        "ssh": ssh_panel(job, tasks),
        "is_owner": job.owner_id == request.user.pk,
    }
    context.update(runtime_notes(job))  # jobs.runtime: ssh key link, debug plugin note
    return context


def tail_logs(tasks: list[Task], job: Job) -> list[Task]:
    """The last lines of a few tasks' logs (failed ones first, then by role and index), each
    as ``task.log_tail`` with the secrets of ``job`` masked: every refresh reads
    ``2 * LOG_TAIL_TASKS`` logs at most, which on Kubernetes are API calls, however many tasks
    the job has. The others get links only."""
    backend = get_backend()
    started = [t for t in tasks if t.backend_ref]
    chosen = sorted(started, key=lambda t: t.state != TaskState.FAILED)[:LOG_TAIL_TASKS]
    for task in chosen:
        task.log_tail = {
            stream: read_task_log(job, task.backend_ref, stream, LOG_TAIL_BYTES, backend).decode(
                "utf-8", "replace"
            )
            for stream in STREAMS
        }
    return chosen


def summary_context(job: Job) -> dict[str, object]:
    """What any user who may list the job sees (jobs.access): states, roles, tasks' states,
    times, exit codes and phrases, the job's reason; no address, port, log or config."""
    attempt = JobAttempt.objects.filter(job=job).order_by("-number").first()
    tasks = list(attempt.tasks.order_by("role", "index")) if attempt else []
    return {
        "job": job,
        "reason": summary_reason(job.reason),  # no quoted log line, addresses masked
        "attempt": attempt,
        "tasks": tasks,
        "roles": list(job.protocol["taskRoles"]),
    }


@login_required
def job_detail(request: HttpRequest, username: str, name: str) -> HttpResponse:
    seen = job_view_for(request.user, username, name)
    if not seen.full:
        return render(request, "jobs/summary.html", summary_context(seen.job))
    job = seen.job
    context = live_context(request, job)
    context["config"] = dump_yaml(mask_secrets(job.protocol))
    context["backend_name"] = get_backend().name
    # The local backend runs a task in its image only with LOCAL_IMAGES=charliecloud.
    context["image_unused"] = context["backend_name"] == "local" and not settings.LOCAL_IMAGES
    backend = get_backend()
    context["unlimited"] = backend.unlimited() if isinstance(backend, SupportsLimits) else []
    owner = job.owner.get_username()
    context["runs_as"] = backend.runs_as(owner) if isinstance(backend, SupportsRunAs) else ""
    context["ws_path"] = f"/ws/jobs/{job.id}/"
    return render(request, "jobs/detail.html", context)


@login_required
def job_live(request: HttpRequest, username: str, name: str) -> HttpResponse:
    job = job_for(request.user, username, name)
    return render(request, "jobs/_live.html", live_context(request, job))


@login_required
@require_POST
def stop_job(request: HttpRequest, username: str, name: str) -> HttpResponse:
    job = job_for(request.user, username, name)
    lifecycle.stop(job, request.user)
    return redirect("jobs:detail", username=username, name=name)
