"""Admin forms: virtual clusters (quota checked against capacity) and users."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.models import Group, User

from clusters.limits import Limit
from clusters.models import DEFAULT_VIRTUAL_CLUSTER, VirtualCluster
from clusters.vc_changes import quota_problems


class OptionalJSONField(forms.JSONField):
    """A JSON field that shows nothing, not ``null``, when it holds no value."""

    def prepare_value(self, value: Any) -> Any:
        return "" if value is None else super().prepare_value(value)


class VirtualClusterForm(forms.ModelForm):
    gpus = OptionalJSONField(
        required=False,
        label="GPUs guaranteed",
        widget=forms.TextInput(attrs={"placeholder": '{"V100": 4}'}),
        help_text='GPUs guaranteed per type, e.g. {"V100": 4}; {} for none; empty for no GPU '
        "limit.",
    )

    class Meta:
        model = VirtualCluster
        fields = [
            "name", "description", "cpu", "memory_mb", "gpus", "max_capacity",
            "strict_fifo", "open_to_all", "members", "groups",
        ]  # fmt: skip
        labels = {
            "cpu": "CPU guaranteed",
            "memory_mb": "Memory guaranteed (MB)",
            "strict_fifo": "Strict FIFO",
            "max_capacity": "Max capacity (% of the cluster)",
        }
        widgets = {
            "members": forms.CheckboxSelectMultiple,
            "groups": forms.CheckboxSelectMultiple,
            "description": forms.Textarea(attrs={"rows": 2}),
        }
        help_texts = {
            "cpu": "Empty: a share of what no other virtual cluster guarantees.",
            "max_capacity": "Beyond its guarantee, its jobs borrow idle room (preemptible) "
            "until they hold this much of the cluster; 100: all of it, 0: never borrow.",
            "open_to_all": "Every user may submit here (members and admins always may).",
            "strict_fifo": "A job that does not fit holds back every job behind it.",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # No groups yet: no empty box, a line that says what to do (the template shows it).
        self.fields["max_capacity"].required = False
        self.no_groups = not Group.objects.exists()
        if self.no_groups:
            del self.fields["groups"]

    def clean_max_capacity(self) -> float:
        """Left empty: 100 (the whole cluster), as OpenPAI's vcMaxCapacity defaults to."""
        value = self.cleaned_data.get("max_capacity")
        return 100.0 if value is None else float(value)

    def clean_gpus(self) -> dict[str, int] | None:
        gpus = self.cleaned_data.get("gpus")
        if gpus in (None, ""):
            return None
        if not isinstance(gpus, dict) or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
            for k, v in gpus.items()
        ):
            raise forms.ValidationError("an object of GPU type -> whole number >= 0")
        return gpus

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        name = data.get("name") or (self.instance.name if self.instance.pk else "")
        if self.instance.pk and name != self.instance.name and self.instance.name == "default":
            self.add_error("name", "the default virtual cluster keeps its name")
        quota = Limit(data.get("cpu"), data.get("memory_mb"), data.get("gpus"))
        for problem in quota_problems(name, quota, self.instance.pk) if name else []:
            self.add_error(None, problem)
        return data


class NewUserForm(forms.Form):
    username = forms.RegexField(regex=r"^[\w.@+-]{1,150}$", max_length=150)
    password = forms.CharField(widget=forms.PasswordInput, min_length=8)
    is_staff = forms.BooleanField(required=False, label="Admin")

    def clean_username(self) -> str:
        name = self.cleaned_data["username"]
        if User.objects.filter(username=name).exists():
            raise forms.ValidationError("a user with this name exists")
        return str(name)


class UserAccessForm(forms.Form):
    is_staff = forms.BooleanField(required=False, label="Admin")
    is_active = forms.BooleanField(required=False, label="Active (unticked: disabled)")
    virtual_clusters = forms.ModelMultipleChoiceField(
        VirtualCluster.objects.all(), required=False, widget=forms.CheckboxSelectMultiple
    )
    # "default" is the empty choice (no default of their own), not listed a second time.
    default_vc = forms.ModelChoiceField(
        VirtualCluster.objects.exclude(name=DEFAULT_VIRTUAL_CLUSTER).order_by("name"),
        required=False, label="Default virtual cluster", empty_label=DEFAULT_VIRTUAL_CLUSTER,
    )  # fmt: skip
