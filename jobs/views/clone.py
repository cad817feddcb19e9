"""Clone a job into the submit page (secrets to re-enter, a new name) and export its config."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse

from jobs.access import job_for
from jobs.forms import SubmitForm
from jobs.models import Job
from jobs.protocol import SECRET_MASK, dump_yaml, mask_secrets
from jobs.views.submit import page


def blank_secrets(protocol: dict[str, Any]) -> dict[str, Any]:
    """The masked job with each masked value replaced by an empty one to fill in."""
    job = mask_secrets(protocol)
    for key in job.get("secrets") or {}:
        job["secrets"][key] = ""
    for prereq in job.get("prerequisites") or []:
        auth = prereq.get("auth") if isinstance(prereq, dict) else None
        if isinstance(auth, dict) and auth.get("password") == SECRET_MASK:
            auth["password"] = ""
    return job


def new_name(job: Job) -> str:
    base = f"{job.name}_clone"
    taken = set(
        Job.objects.filter(owner_id=job.owner_id, name__startswith=base).values_list(
            "name", flat=True
        )
    )
    if base not in taken:
        return base
    n = 2
    while f"{base}{n}" in taken:
        n += 1
    return f"{base}{n}"


@login_required
def clone_job(request: HttpRequest, username: str, name: str) -> HttpResponse:
    job = job_for(request.user, username, name)
    protocol = blank_secrets(job.protocol)
    protocol["name"] = new_name(job)
    text = dump_yaml(protocol)
    form = SubmitForm(initial={"text": text, "virtual_cluster": job.virtual_cluster.name})
    has_secrets = bool(job.protocol.get("secrets"))
    return page(request, text_form=form, cloned_from=job, has_secrets=has_secrets)


@login_required
def export_config(request: HttpRequest, username: str, name: str) -> HttpResponse:
    job = job_for(request.user, username, name)
    body = dump_yaml(mask_secrets(job.protocol))
    response = HttpResponse(body, content_type="application/yaml; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{job.name}.yaml"'
    return response
