"""The virtual clusters a user may submit to, each with its free quota, for the form."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from clusters.models import DEFAULT_VIRTUAL_CLUSTER, DefaultVirtualCluster, VirtualCluster
from jobs.vc_usage import overview


@dataclass
class VCChoice:
    name: str
    free: str


def amount(quota: int | None, used: int, unit: str, total: int | None) -> str:
    """What the VC has free of one resource; without a quota, what the cluster has in all."""
    if quota is not None:
        return f"{max(0, quota - used)} {unit}"
    return f"{unit}: no quota" + ("" if total is None else f" (cluster: {total})")


def vc_choices(user: AbstractBaseUser | AnonymousUser) -> list[VCChoice]:
    names = list(VirtualCluster.objects.usable_by(user).values_list("name", flat=True))
    views, capacity = overview(names)
    choices = []
    for view in sorted(views, key=lambda v: v.vc.name):
        gpus = view.quota.gpus
        if gpus is None:
            total = None if capacity.gpus is None else sum(capacity.gpus.values())
            gpu = amount(None, 0, "GPU", total)
        else:
            used = sum(view.used.gpus.values())
            gpu = f"{max(0, sum(gpus.values()) - used)} GPU"
        free = ", ".join(
            [
                amount(view.quota.cpu, view.used.cpu, "CPU", capacity.cpu),
                amount(view.quota.memory_mb, view.used.memory_mb, "MB", capacity.memory_mb),
                gpu,
            ]
        )
        choices.append(VCChoice(view.vc.name, free))
    return choices


def users_default_vc(user: AbstractBaseUser | AnonymousUser) -> str:
    """The virtual cluster a job naming none goes to for ``user`` (``admit.chosen_or_default``):
    theirs when an admin set one, else ``default``."""
    mine = DefaultVirtualCluster.objects.filter(user_id=user.pk)
    name = mine.values_list("virtual_cluster__name", flat=True).first()
    return name or DEFAULT_VIRTUAL_CLUSTER
