from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from clusters.registry import get_backend
from jobs import lifecycle
from jobs.access import job_for
from jobs.models import Job, JobAttempt
from jobs.protocol import dump_yaml, mask_secrets
from jobs.runtime.notes import runtime_notes
from jobs.views.tasks import port_links, ssh_panel

LOG_TAIL_BYTES = 4096


def live_context(request: HttpRequest, job: Job) -> dict[str, object]:
    attempts = list(JobAttempt.objects.filter(job=job).order_by("number"))
    chosen = request.GET.get("attempt")
    attempt = next((a for a in attempts if str(a.number) == chosen), None)
    attempt = attempt or (attempts[-1] if attempts else None)
    tasks = list(attempt.tasks.order_by("role", "index")) if attempt else []
    backend = get_backend()
    for task in tasks:
        task.label = f"{task.role}-{task.index}"
        task.port_links = port_links(task)
        task.log_tail = {
            stream: backend.read_log(task.backend_ref, stream, LOG_TAIL_BYTES).decode(
                "utf-8", "replace"
            )
            if task.backend_ref
            else ""
            for stream in ("stdout", "stderr")
        }
    context: dict[str, object] = {
        "job": job,
        "attempts": attempts,
        "attempt": attempt,
        "tasks": tasks,
        "ssh": ssh_panel(job, tasks),
        "is_owner": job.owner_id == request.user.pk,
    }
    context.update(runtime_notes(job))  # jobs.runtime: ssh key link, debug plugin note
    return context


@login_required
def job_detail(request: HttpRequest, username: str, name: str) -> HttpResponse:
    job = job_for(request.user, username, name)
    context = live_context(request, job)
    context["config"] = dump_yaml(mask_secrets(job.protocol))
    context["backend_name"] = get_backend().name
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
