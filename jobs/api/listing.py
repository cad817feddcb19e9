"""``GET /api/v2/jobs``: OpenPAI's job summaries, filtered, ordered and paginated in SQL."""

from __future__ import annotations

from typing import Any

from django.db.models import F, OuterRef, Subquery
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request

from jobs.access import is_admin, listable_jobs, summary_reason
from jobs.api.openpai import (
    NO_RETRIES,
    debug_id,
    epoch_ms,
    job_priority,
    retry_details_by_job,
    sub_state,
)
from jobs.filters import JobFilter, PageForm, filter_errors
from jobs.models import JobAttempt

DEFAULT_LIMIT = 100


SUMMARY_FIELDS = (
    "name",
    "owner__username",
    "state",
    "retries",
    "created_at",
    "started_at",
    "completed_at",
    "exit_code",
    "virtual_cluster__name",
    "gpu_count",
    "task_count",
    "role_count",
    "reason",
    "tags",
    "priority",
)

# OpenPAI's ``debugId``: the backend's name for the job, here its latest attempt's key.
LATEST_KEY = Subquery(
    JobAttempt.objects.filter(job=OuterRef("pk")).order_by("-number").values("key")[:1]
)


def job_summary(
    row: dict[str, Any], full: bool = True, retry_details: dict[str, int] | None = None
) -> dict[str, Any]:
    """OpenPAI's summary of a job from its ``SUMMARY_FIELDS`` (rows, not model instances: a
    page of a hundred jobs with their owners and virtual clusters built as objects took five
    times as long as its query) and its ``retry_details`` (``retry_details_by_job``)."""
    state = row["state"]
    return {
        "protocolVersion": "2",
        "debugId": row["latest_key"] or debug_id(row["job_id"]),
        "name": row["name"],
        "username": row["owner__username"],
        "state": state,
        "subState": sub_state(state),
        "executionType": "STOP" if state in ("STOPPING", "STOPPED") else "START",
        "retries": row["retries"],
        "retryDetails": retry_details or dict(NO_RETRIES),
        # OpenPAI's delay before the next retry (retryPolicyStatus.retryDelaySec); ours retry
        # at once, so there is never one to wait out.
        "retryDelayTime": None,
        "submissionTime": epoch_ms(row["created_at"]),
        "createdTime": epoch_ms(row["created_at"]),
        "launchedTime": epoch_ms(row["started_at"]),
        "completedTime": epoch_ms(row["completed_at"]),
        "appExitCode": row["exit_code"],
        "virtualCluster": row["virtual_cluster__name"],
        "totalGpuNumber": row["gpu_count"],
        "totalTaskNumber": row["task_count"],
        "totalTaskRoleNumber": row["role_count"],
        "jobPriority": job_priority(row["priority"]),
        # Another user's job: its reason without a quoted log line or an address (jobs.access).
        "reason": row["reason"] if full else summary_reason(row["reason"]),
        "tags": list(row["tags"]),
    }


def job_filter(request: Request, owner: str | None = None) -> JobFilter:
    """The list's ``JobFilter`` on the jobs ``request.user`` may list (of ``owner`` only when
    given: OpenPAI's v1 ``/user/<owner>/jobs``); 400 naming each parameter it refuses."""
    params = request.query_params.copy()
    if owner is not None:
        params["username"] = owner
    job_filter = JobFilter(params, queryset=listable_jobs(request.user))
    errors = filter_errors(job_filter)
    if errors:
        raise ValidationError(errors)
    return job_filter


def page_of(request: Request) -> dict[str, Any]:
    form = PageForm(request.query_params)
    if not form.is_valid():
        raise ValidationError({name: list(errors) for name, errors in form.errors.items()})
    return form.cleaned_data


def list_jobs(request: Request, owner: str | None = None) -> Any:
    page = page_of(request)
    offset = page["offset"] or 0
    limit = DEFAULT_LIMIT if page["limit"] is None else page["limit"]
    jobs = job_filter(request, owner).ordered()
    # The id under another name: selected as ``id``, Django would sort by its column number
    # (``ORDER BY 1``) rather than by ``jobs_job.id``, which the list's plan is checked by.
    fields = jobs.values(*SUMMARY_FIELDS, job_id=F("id"), latest_key=LATEST_KEY)
    rows = list(fields[offset : offset + limit]) if limit else []
    viewer = request.user.get_username()
    admin = is_admin(request.user)
    # One more query when a job of the page was retried, none else.
    retried = retry_details_by_job({row["job_id"]: row["retries"] for row in rows})
    data = [
        job_summary(row, admin or row["owner__username"] == viewer, retried[row["job_id"]])
        for row in rows
    ]
    if page["withTotalCount"] in ("true", "True", "1"):
        return {"totalCount": jobs.count(), "data": data}
    return data
