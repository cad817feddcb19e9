from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from jobs import lifecycle
from jobs.forms import SubmitForm


@login_required
def submit_job(request: HttpRequest) -> HttpResponse:
    errors: list[str] = []
    if request.method != "POST":
        return render(request, "jobs/submit.html", {"form": SubmitForm(), "errors": errors})
    try:
        form = SubmitForm(request.POST)
    except RequestDataTooBig:
        form = SubmitForm()
        errors = ["job file: the request is larger than the limit for a job file"]
        return render(request, "jobs/submit.html", {"form": form, "errors": errors}, status=400)
    if form.is_valid():
        vc = form.cleaned_data["virtual_cluster"]
        try:
            job = lifecycle.submit(
                request.user,
                form.cleaned_data["text"],
                virtual_cluster=vc.name if vc else None,
                deployment=form.cleaned_data["deployment"] or None,
            )
        except lifecycle.SubmitError as exc:
            context = {"form": form, "errors": exc.errors}
            return render(request, "jobs/submit.html", context, status=exc.status)
        return redirect("jobs:detail", username=job.owner.username, name=job.name)
    errors = [f"{field}: {msg}" for field, msgs in form.errors.items() for msg in msgs]
    return render(request, "jobs/submit.html", {"form": form, "errors": errors}, status=400)
