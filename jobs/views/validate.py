"""Check a job as it is typed (htmx): every issue with its path and, when known, its line."""

from __future__ import annotations

import json
from typing import Any, cast

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from jobs.errors import SubmitError
from jobs.forms.builder import build_yaml, roles_for_template
from jobs.forms.from_job import fill_form
from jobs.forms.issue_lines import located
from jobs.forms.quota import vc_choices
from jobs.lifecycle.submit import acceptance_check
from protocol import LoadedJob, ProtocolError, load_job


def check(text: str) -> dict[str, object]:
    if not text.strip():
        return {"empty": True}
    try:
        loaded = load_job(text, max_bytes=settings.JOB_MAX_BYTES)
    except ProtocolError as exc:
        return {"issues": located(text, exc.issues)}
    return {"ok": True, "job": loaded.job, "warnings": loaded.warnings, "loaded": loaded}


@login_required
@require_POST
def validate(request: HttpRequest) -> HttpResponse:
    """The file's issues with their lines; for a well-formed job, what submit would refuse
    besides (the virtual cluster chosen beside the text, its quota, the cluster's size,
    storages): "Valid" means submit takes it (issue 28)."""
    checked = check(request.POST.get("text", ""))
    loaded = checked.pop("loaded", None)
    if isinstance(loaded, LoadedJob):
        vc = request.POST.get("virtual_cluster", "").strip() or None
        deployment = request.POST.get("deployment", "").strip() or None
        try:
            acceptance_check(request.user, loaded, virtual_cluster=vc, deployment=deployment)
        except SubmitError as exc:
            issues = [{"path": "", "message": error, "line": None} for error in exc.errors]
            checked = {"issues": issues}
    return render(request, "jobs/_validation.html", checked)


@login_required
@require_POST
def form_to_text(request: HttpRequest) -> HttpResponse:
    """The form's job as v2 YAML, into the text editor (switching form -> text)."""
    text = build_yaml(request.POST)
    return render(request, "jobs/_text_editor.html", {"text": text, **check(text)})


@login_required
@require_POST
def text_to_form(request: HttpRequest) -> HttpResponse:
    """The text's job in the form (switching text -> form): loaded through the protocol, then
    shown in the builder. A job with errors, or with what the form cannot show, stays in text
    (a 400 that says why); the text itself is never touched."""
    checked = check(request.POST.get("text", ""))
    if not checked.get("ok"):
        issues = checked.get("issues") or [{"path": "text", "message": "is empty", "line": None}]
        return render(request, "jobs/_to_form.html", {"issues": issues}, status=400)
    vc = request.POST.get("virtual_cluster", "").strip()
    deployment = request.POST.get("deployment", "").strip()
    job = cast(dict[str, Any], checked["job"])
    if deployment and deployment not in [d["name"] for d in job["deployments"]]:
        issue = {"path": "deployment", "message": f"the job has no deployment {deployment}"}
        return render(request, "jobs/_to_form.html", {"issues": [issue]}, status=400)
    filled = fill_form(job, vc=vc, deployment=deployment)
    if filled.cannot:
        return render(request, "jobs/_to_form.html", {"cannot": filled.cannot}, status=400)
    builder = filled.data()
    context = {
        "builder": builder,
        "roles": roles_for_template(builder),
        "vcs": vc_choices(request.user),
        "notes": filled.notes + cast(list[str], checked["warnings"]),
    }
    response = render(request, "jobs/_builder.html", context)
    response["HX-Trigger-After-Swap"] = json.dumps({"showTab": {"tab": "form"}})
    return response
