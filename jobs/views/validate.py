"""Check a job as it is typed (htmx): every issue with its path and, when known, its line."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from jobs.forms.builder import build_yaml
from jobs.forms.lines import located
from jobs.protocol import ProtocolError, load_job


def check(text: str) -> dict[str, object]:
    if not text.strip():
        return {"empty": True}
    if len(text.encode()) > settings.JOB_MAX_BYTES:
        limit = settings.JOB_MAX_BYTES
        return {"issues": [{"path": "", "message": f"more than {limit} bytes", "line": None}]}
    try:
        loaded = load_job(text)
    except ProtocolError as exc:
        return {"issues": located(text, exc.issues)}
    return {"ok": True, "job": loaded.job, "warnings": loaded.warnings}


@login_required
@require_POST
def validate(request: HttpRequest) -> HttpResponse:
    return render(request, "jobs/_validation.html", check(request.POST.get("text", "")))


@login_required
@require_POST
def form_to_text(request: HttpRequest) -> HttpResponse:
    """The form's job as v2 YAML, into the text editor (switching form -> text)."""
    text = build_yaml(request.POST)
    return render(request, "jobs/_text_editor.html", {"text": text, **check(text)})
