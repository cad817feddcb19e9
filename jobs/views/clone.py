"""Clone a job into the submit page (a new name, secrets masked to enter again, the text and
the form filled) and export its config. The page's forms post to the submit page: a clone is
submitted exactly as any other job, and a secret left masked is refused there."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse

from jobs.access import job_for
from jobs.forms import SubmitForm
from jobs.forms.clone_text import clone_text
from jobs.forms.from_job import fill_form
from jobs.models import Job
from jobs.views.submit import page, submit_job
from protocol import SECRET_MASK, dump_yaml, mask_secrets, masks_left


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
    if request.method == "POST":  # a page from before the forms said where to post
        return submit_job(request)
    protocol = mask_secrets(job.protocol)
    protocol["name"] = new_name(job)
    # The text as its owner wrote it (comments kept) when that is provably the same job.
    text = clone_text(job.submitted_text, job.protocol, protocol["name"]) or dump_yaml(protocol)
    form = SubmitForm(
        initial={"text": text, "virtual_cluster": job.virtual_cluster.name}, user=request.user
    )
    # The Form tab too, when the form can show the job (else it says why, as text -> form does).
    filled = fill_form(protocol, vc=job.virtual_cluster.name)
    return page(
        request,
        text_form=form,
        builder=None if filled.cannot else filled.data(),
        notes=filled.notes,
        form_cannot=filled.cannot,
        cloned_from=job,
        masked=masks_left(protocol),
        mask=SECRET_MASK,
    )


@login_required
def export_config(request: HttpRequest, username: str, name: str) -> HttpResponse:
    job = job_for(request.user, username, name)
    body = dump_yaml(mask_secrets(job.protocol))
    response = HttpResponse(body, content_type="application/yaml; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{job.name}.yaml"'
    return response
