"""The user's alerts page, ``/account/alerts/``: the settings form and the last deliveries,
a failed one with its error; a button sends a test alert."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from notify import options
from notify.forms import AlertSettingsForm
from notify.probe import send_probe


@login_required
def alert_settings(request: HttpRequest) -> HttpResponse:
    user = request.user
    form = AlertSettingsForm(user, request.POST if request.method == "POST" else None)  # type: ignore[arg-type]
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                with transaction.atomic():
                    form.save()
            except options.Invalid:
                pass  # on its field
            else:
                messages.success(request, "alert settings saved")
                return redirect("notify:settings")
        status = 400
    context = {
        "form": form,
        "deliveries": options.recent(user),  # type: ignore[arg-type]
        "email_available": bool(settings.EMAIL_HOST),
    }
    return render(request, "notify/settings.html", context, status=status)


@login_required
@require_POST
def send_test(request: HttpRequest) -> HttpResponse:
    channels = send_probe(request.user)  # type: ignore[arg-type]
    if channels:
        messages.success(request, f"a test alert is on its way by {' and '.join(channels)}")
    else:
        messages.error(request, "no channel is on: turn on e-mail or set a webhook first")
    return redirect("notify:settings")
