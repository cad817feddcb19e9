"""Removing a user, which would take their jobs with it: refused while any of them is live,
since the tasks of a deleted job would go on running where nobody sees or stops them."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from jobs.models import Job
from jobs.states import LIVE_JOB_STATES


class UserHasLiveJobs(Exception):
    def __init__(self, username: str, count: int) -> None:
        self.count = count
        super().__init__(
            f"user {username} has {count} live job{'s' if count != 1 else ''} (waiting, running "
            "or stopping): stop them and wait until they have ended, then remove the user"
        )


def live_job_count(user: Any) -> int:
    return Job.objects.filter(owner_id=user.pk, state__in=LIVE_JOB_STATES).count()


def remove_user(user: Any) -> None:
    """Delete ``user`` and their finished jobs, or raise ``UserHasLiveJobs``. The user's row is
    locked first: a submission by them (which references the row) waits, or went first and is
    counted."""
    with transaction.atomic():
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        count = live_job_count(user)
        if count:
            raise UserHasLiveJobs(user.get_username(), count)
        user.delete()
