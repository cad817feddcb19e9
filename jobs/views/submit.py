"""The submit page: one page, three ways (text, file, form); every way goes through
``lifecycle.submit``."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render

from jobs import lifecycle
from jobs.forms import SubmitForm, UploadForm
from jobs.forms.builder import blank_roles, build_yaml, roles_for_template
from jobs.forms.quota import users_default_vc, vc_choices

MODES = ("text", "file", "form")
TOO_BIG = "job file: the request is larger than the limit for a job file"


def page(
    request: HttpRequest,
    *,
    mode: str = "text",
    text_form: SubmitForm | None = None,
    builder: QueryDict | None = None,
    errors: list[str] | None = None,
    status: int = 200,
    **extra: Any,
) -> HttpResponse:
    context = {
        "mode": mode,
        "form": text_form or SubmitForm(user=request.user),
        "upload": UploadForm(),
        "vcs": vc_choices(request.user),
        # A new form starts on the user's default virtual cluster, as text and files do.
        "builder": builder
        or QueryDict(urlencode({"virtual_cluster": users_default_vc(request.user)})),
        "roles": roles_for_template(builder) if builder else blank_roles(),
        "errors": errors or [],
        "max_bytes": settings.JOB_MAX_BYTES,
        **extra,
    }
    return render(request, "jobs/submit.html", context, status=status)


def field_errors(form: SubmitForm | UploadForm) -> list[str]:
    return [f"{name}: {msg}" for name, msgs in form.errors.items() for msg in msgs]


@login_required
def submit_job(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return page(request)
    try:
        mode = request.POST.get("mode", "text")
    except RequestDataTooBig:
        return page(request, errors=[TOO_BIG], status=400)
    if mode == "file":
        return submit_file(request)
    if mode == "form":
        return submit_text(request, build_yaml(request.POST), mode="form", builder=request.POST)
    form = SubmitForm(request.POST, user=request.user)
    if not form.is_valid():
        return page(request, text_form=form, errors=field_errors(form), status=400)
    vc = form.cleaned_data["virtual_cluster"]
    return submit_text(
        request,
        form.cleaned_data["text"],
        vc=vc.name if vc else None,
        deployment=form.cleaned_data["deployment"] or None,
        text_form=form,
    )


def submit_file(request: HttpRequest) -> HttpResponse:
    upload = UploadForm(request.POST, request.FILES)
    if not upload.is_valid():
        return page(request, mode="file", errors=field_errors(upload), status=400)
    text = upload.cleaned_data["file"]
    return submit_text(
        request, text, mode="file", text_form=SubmitForm(initial={"text": text}, user=request.user)
    )


def submit_text(
    request: HttpRequest,
    text: str,
    *,
    vc: str | None = None,
    deployment: str | None = None,
    mode: str = "text",
    text_form: SubmitForm | None = None,
    builder: QueryDict | None = None,
) -> HttpResponse:
    try:
        job = lifecycle.submit(request.user, text, virtual_cluster=vc, deployment=deployment)
    except lifecycle.SubmitError as exc:
        form = text_form or SubmitForm(initial={"text": text}, user=request.user)
        return page(
            request,
            mode=mode,
            text_form=form,
            builder=builder,
            errors=exc.errors,
            status=exc.status,
        )
    return redirect("jobs:detail", username=job.owner.username, name=job.name)
