from __future__ import annotations

from django import forms

from clusters.models import VirtualCluster


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
        empty_label="(as the job says, else default)",
    )
    deployment = forms.CharField(
        max_length=64,
        required=False,
        help_text="Which of the job's deployments to use (default: defaults.deployment).",
    )
