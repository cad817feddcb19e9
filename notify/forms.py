"""The alerts page's form: the same rules as the API (``notify.options``)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser

from notify import options
from notify.choose import settings_of
from notify.models import DEFAULT_EVENTS
from protocol.notify_extras import MAX_WAITING_MINUTES

LABELS = {
    "succeeded": "a job succeeded",
    "failed": "a job failed",
    "stopped": "a job was stopped",
    "preempted": "a job was preempted (it waits again)",
    "waiting": "a job has waited longer than the threshold",
    "alert": "the portal's own alerts (admins): tasks killed for memory, silent nodes, "
    "an unreachable backend",
}
FIELDS = {  # the form's name -> the API's (the name an error carries)
    "address": "emailAddress",
    "email": "email",
    "webhook_url": "webhookUrl",
    "webhook_secret": "webhookSecret",
    "events": "events",
    "waiting_minutes": "waitingMinutes",
}


class AlertSettingsForm(forms.Form):
    address = forms.EmailField(required=False, label="E-mail address", max_length=254)
    email = forms.BooleanField(required=False, label="E-mail me")
    webhook_url = forms.CharField(
        required=False,
        max_length=2000,
        label="Webhook URL",
        widget=forms.URLInput(attrs={"placeholder": "https://example.org/portal-hook"}),
        help_text="Empty: no webhook. Each delivery is a signed JSON POST (see the README).",
    )
    webhook_secret = forms.CharField(
        required=False,
        max_length=256,
        strip=False,
        label="Webhook secret",
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
    )
    events = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, label="Tell me when"
    )
    waiting_minutes = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_WAITING_MINUTES, label="Waited too long after"
    )

    def __init__(self, user: AbstractBaseUser, *args: Any, **kwargs: Any) -> None:
        row = settings_of(user)
        kwargs.setdefault(
            "initial",
            {
                "email": bool(row and row.email),
                "webhook_url": row.webhook_url if row else "",
                "events": list(row.events) if row else list(DEFAULT_EVENTS),
                "waiting_minutes": row.waiting_minutes if row else None,
            },
        )
        super().__init__(*args, **kwargs)
        self.user = user
        self.secret_set = bool(row and row.webhook_secret)
        choices = [(e, LABELS[e]) for e in options.events_for(user)]
        self.fields["events"].choices = choices  # type: ignore[attr-defined]
        self.fields["webhook_secret"].help_text = (
            "A secret is set: leave empty to keep it." if self.secret_set else "Signs each body."
        )
        default = round(settings.ALERT_JOB_WAITING_SECONDS / 60)
        self.fields["waiting_minutes"].help_text = f"minutes; empty: {default} (the portal's)"
        self.fields["address"].initial = getattr(user, "email", "")

    def save(self) -> None:
        """Check and save; each refusal becomes an error on its field."""
        data = dict(self.cleaned_data)
        address = data.pop("address")
        if not data["webhook_secret"]:
            del data["webhook_secret"]  # kept as it is
        if address != getattr(self.user, "email", ""):
            self.user.email = address  # type: ignore[attr-defined]
            self.user.save(update_fields=["email"])
        try:
            data["email"] = options.check_email(self.user, data["email"])
            data["webhook_url"] = options.check_url(data["webhook_url"])
            data["events"] = options.check_events(self.user, data["events"])
            options.save(self.user, data)
        except options.Invalid as exc:
            field = next(name for name, api in FIELDS.items() if api == exc.field)
            self.add_error(field, str(exc))
            raise
