from __future__ import annotations

from typing import Any, cast

from django import forms
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.files.uploadedfile import UploadedFile

from clusters.models import VirtualCluster
from jobs.forms.quota import users_default_vc

UPLOAD_SUFFIXES = (".json", ".yaml", ".yml")


class SubmitForm(forms.Form):
    text = forms.CharField(
        label="Job (v2 YAML or v1 JSON)",
        widget=forms.Textarea(attrs={"rows": 24, "spellcheck": "false", "class": "code"}),
        strip=False,
    )
    virtual_cluster = forms.ModelChoiceField(
        queryset=VirtualCluster.objects.all(),
        to_field_name="name",
        required=False,
    )
    deployment = forms.CharField(
        max_length=64,
        required=False,
        help_text="Which of the job's deployments to use (default: defaults.deployment).",
    )

    def __init__(self, *args: Any, user: AbstractBaseUser | AnonymousUser, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Exactly the virtual clusters admission lets ``user`` submit to; the empty choice
        # names where a job naming none goes (issue 27: "else default" read as the VC named so).
        field = cast(forms.ModelChoiceField, self.fields["virtual_cluster"])
        field.queryset = VirtualCluster.objects.usable_by(user).order_by("name")
        field.empty_label = f"(as the job says, else your default: {users_default_vc(user)})"


class UploadForm(forms.Form):
    file = forms.FileField(label="Job file (.json, .yaml or .yml)")

    def clean_file(self) -> str:
        upload: UploadedFile = self.cleaned_data["file"]
        name = (upload.name or "").lower()
        if not name.endswith(UPLOAD_SUFFIXES):
            raise forms.ValidationError("choose a .json, .yaml or .yml file")
        limit = settings.JOB_MAX_BYTES
        if (upload.size or 0) > limit:
            raise forms.ValidationError(
                f"the file is {upload.size} bytes; a job file may have at most {limit} bytes"
            )
        data = upload.read(limit + 1)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise forms.ValidationError("the file is not UTF-8 text") from None
