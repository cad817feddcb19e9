"""The virtual clusters a user may submit to, each with its free quota, for the form."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from clusters.models import VirtualCluster
from clusters.overview import overview


@dataclass
class VCChoice:
    name: str
    free: str


def amount(quota: int | None, used: int, unit: str) -> str:
    return f"{unit} unlimited" if quota is None else f"{max(0, quota - used)} {unit}"


def vc_choices(user: AbstractBaseUser | AnonymousUser) -> list[VCChoice]:
    names = list(VirtualCluster.objects.usable_by(user).values_list("name", flat=True))
    views, _capacity = overview(names)
    choices = []
    for view in sorted(views, key=lambda v: v.vc.name):
        gpus = view.quota.gpus
        if gpus is None:
            gpu = "GPU unlimited"
        else:
            used = sum(view.used.gpus.values())
            gpu = f"{max(0, sum(gpus.values()) - used)} GPU"
        free = ", ".join(
            [
                amount(view.quota.cpu, view.used.cpu, "CPU"),
                amount(view.quota.memory_mb, view.used.memory_mb, "MB"),
                gpu,
            ]
        )
        choices.append(VCChoice(view.vc.name, free))
    return choices
