"""Who may see a job, and how much of it.

* Its owner and admins see all of it: config, logs, addresses and ports, SSH, terminal.
* Any other signed-in user sees the status summary (states, roles, task states, times, exit
  codes and masked reasons) of the jobs they may list, as OpenPAI and Slurm's ``squeue`` show
  every user's jobs; everything else of it is a 404 to them.
* ``settings.JOBS_PRIVATE`` (Slurm's ``PrivateData=jobs``) hides other users' jobs entirely:
  lists, counts and details show a user only their own.
* ``settings.API_ANONYMOUS_JOB_STATUS`` (off by default) lets a caller without a token list
  and read the status summary of the jobs of the virtual clusters open to all, as openpaisdk
  does (jobs.api.permissions lets such a caller in, to those reads only).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q, QuerySet
from django.http import Http404

from clusters.models import VirtualCluster
from jobs.models import Job


def is_admin(user: AbstractBaseUser | AnonymousUser) -> bool:
    return bool(getattr(user, "is_staff", False))


def visible_jobs(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Job]:
    """The jobs ``user`` sees whole: their own, or all for an admin."""
    jobs = Job.objects.all()
    return jobs if is_admin(user) else jobs.filter(owner_id=user.pk)


def listable_jobs(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Job]:
    """Jobs a user may see in lists and as a status summary: an admin all, others their own
    and those of the virtual clusters they may use (only their own with ``JOBS_PRIVATE``)."""
    if is_admin(user):
        return Job.objects.all()
    if settings.JOBS_PRIVATE:
        return Job.objects.filter(owner_id=user.pk)
    if not user.is_authenticated:
        if not settings.API_ANONYMOUS_JOB_STATUS:
            return Job.objects.none()
        return Job.objects.filter(virtual_cluster__open_to_all=True)
    # The ids first (a few rows): with a subquery PostgreSQL cannot tell how many jobs match,
    # and sorts them all instead of walking an index and stopping after a page.
    usable = list(VirtualCluster.objects.usable_by(user).values_list("id", flat=True))
    return Job.objects.filter(Q(owner_id=user.pk) | Q(virtual_cluster_id__in=usable))


def job_for(user: AbstractBaseUser | AnonymousUser, username: str, name: str) -> Job:
    """The job ``username~name`` when ``user`` may see all of it, else Http404."""
    return named_job(visible_jobs(user), username, name)


def named_job(jobs: QuerySet[Job], username: str, name: str) -> Job:
    """The job ``username~name`` among ``jobs`` (with its owner and virtual cluster), else
    Http404."""
    job = jobs.select_related("owner", "virtual_cluster").filter(named(username, name)).first()
    if job is None:
        raise Http404(f"no job {username}~{name}")
    return job


def named(username: str, name: str) -> Q:
    """The filter of the job ``username~name``."""
    return Q(owner__username=username, name=name)


@dataclass(frozen=True)
class JobView:
    """A job and whether its reader sees all of it (``full``) or only its status summary."""

    job: Job
    full: bool


def job_view_for(user: AbstractBaseUser | AnonymousUser, username: str, name: str) -> JobView:
    """The job ``username~name`` when ``user`` may at least list it, else Http404."""
    return view_of(user, named_job(listable_jobs(user), username, name))


def view_of(user: AbstractBaseUser | AnonymousUser, job: Job) -> JobView:
    """``job`` as ``user``, who may list it, sees it."""
    return JobView(job, full=is_admin(user) or job.owner_id == user.pk)


# What a job's reason may hold that is its owner's: a quoted log line (``— "..."``, as
# jobs.lifecycle.exits.sentence writes it) and an address.
QUOTED_LOG_LINE = re.compile(r' — "[^"\n]*"?')
ADDRESS = re.compile(
    r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b"  # IPv4[:port]
    r"|\b(?:[0-9a-fA-F]{1,4}:){4,7}[0-9a-fA-F]{1,4}\b"  # IPv6, not a time of day
    r"|[0-9a-fA-F]{0,4}(?::[0-9a-fA-F]{1,4})*::(?:[0-9a-fA-F]{1,4}:?)*"  # IPv6 with ::
)


def summary_reason(text: str) -> str:
    """A job's or task's reason as another user sees it: without the log line it quotes
    and with addresses masked."""
    return ADDRESS.sub("<address>", QUOTED_LOG_LINE.sub("", text))
