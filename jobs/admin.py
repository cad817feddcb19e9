"""Django's admin shows jobs, attempts, tasks and events to read, never to write: a job comes
from a submission (its checks, quota and secrets) and changes state only through
``jobs.lifecycle`` (compare-and-swap updates the scheduler relies on), so the raw "Add" and
"Change" forms are gone (issue 28). An ended job may be deleted; one that waits or runs is
stopped first (its tasks would be left behind)."""

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from jobs.models import Job, JobAttempt, JobEvent, Task
from jobs.states import FINAL_JOB_STATES


def ended_job_of(obj: Any) -> bool:
    """Whether ``obj`` (a job, or an attempt, task or event of one) belongs to an ended job."""
    job = obj if isinstance(obj, Job) else getattr(obj, "job", None) or obj.attempt.job
    return job.state in FINAL_JOB_STATES


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Only as part of an ended job's deletion (Django asks for each related row)."""
        return bool(request.user.is_superuser) and obj is not None and ended_job_of(obj)


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    list_display = ["name", "owner", "state", "virtual_cluster", "created_at"]
    list_filter = ["state", "virtual_cluster"]
    search_fields = ["name", "owner__username"]
    # The protocol and the submitted text may hold secrets in clear, the private key is the
    # owner's alone: never shown, not even to a superuser.
    exclude = ["protocol", "submitted_text", "ssh_private_key"]

    def has_delete_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        return bool(request.user.is_superuser) and (obj is None or ended_job_of(obj))

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        queryset.filter(state__in=FINAL_JOB_STATES).delete()  # "delete selected": ended only


@admin.register(JobAttempt)
class JobAttemptAdmin(ReadOnlyAdmin):
    list_display = ["job", "number", "state", "created_at"]


@admin.register(Task)
class TaskAdmin(ReadOnlyAdmin):
    list_display = ["attempt", "role", "index", "state", "ip", "exit_code", "retries"]
    list_filter = ["state"]


@admin.register(JobEvent)
class JobEventAdmin(ReadOnlyAdmin):
    list_display = ["job", "kind", "message", "created_at"]
