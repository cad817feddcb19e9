"""Who may see a job: its owner and admins; to everyone else it does not exist (404)."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q, QuerySet
from django.http import Http404

from jobs.models import Job


def is_admin(user: AbstractBaseUser | AnonymousUser) -> bool:
    return bool(getattr(user, "is_staff", False))


def visible_jobs(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Job]:
    jobs = Job.objects.all()
    return jobs if is_admin(user) else jobs.filter(owner_id=user.pk)


def listable_jobs(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Job]:
    """Jobs a user may see in lists: an admin all, others their own and those of the virtual
    clusters they may use (name, user, state and resources only; details stay owner-only)."""
    if is_admin(user):
        return Job.objects.all()
    from clusters.models import VirtualCluster

    # The ids first (a few rows): with a subquery PostgreSQL cannot tell how many jobs match,
    # and sorts them all instead of walking an index and stopping after a page.
    usable = list(VirtualCluster.objects.usable_by(user).values_list("id", flat=True))
    return Job.objects.filter(Q(owner_id=user.pk) | Q(virtual_cluster_id__in=usable))


def job_for(user: AbstractBaseUser | AnonymousUser, username: str, name: str) -> Job:
    """The job ``username~name`` when ``user`` may see it, else Http404."""
    job = (
        visible_jobs(user)
        .select_related("owner", "virtual_cluster")
        .filter(owner__username=username, name=name)
        .first()
    )
    if job is None:
        raise Http404(f"no job {username}~{name}")
    return job
