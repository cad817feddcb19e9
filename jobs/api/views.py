from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Subquery
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, PolymorphicProxySerializer, extend_schema
from rest_framework import status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apikit.openapi import ERRORS, ErrorSerializer
from jobs import lifecycle
from jobs.access import JobView, job_view_for, listable_jobs, named, view_of
from jobs.api.actions import pending_attempt
from jobs.api.listing import list_jobs
from jobs.api.openpai import api_base_url, job_detail
from jobs.api.parsers import JobTextParser
from jobs.api.permissions import SignedInOrAnonymousStatus
from jobs.api.serializers import (
    JobDetailSerializer,
    JobPageSerializer,
    JobSummarySerializer,
    SubmittedSerializer,
)
from jobs.api.waiting import MAX_WAIT_SECONDS, wait_seconds, waited_caller
from jobs.models import JobAttempt, Task
from protocol import json_schema

LIST_PARAMETERS = {
    "username": "users, comma-separated",
    "vc": "virtual clusters, comma-separated",
    "state": "job states, comma-separated",
    "keyword": "part of the job's name, its user's or its virtual cluster's",
    "tagsContain": "tags, comma-separated: jobs carrying any of them",
    "tagsNotContain": "tags, comma-separated: jobs carrying none of them",
    "tag": "one tag the jobs carry (as tagsContain)",
    "jobPriority": "priority classes (crit, prod, test, default, oppo) or integers",
    "offset": "jobs to skip",
    "limit": "jobs in the page (0-1000, default 100; 0 with withTotalCount: the count only)",
    "order": "<field>[,ASC|DESC] or -<field>: submissionTime, completionTime, jobName, "
    "username, vc, state, retries, totalTaskNumber (taskCount), totalGpuNumber (gpuCount), "
    "jobPriority",
    "withTotalCount": "true: answer {totalCount, data}",
}


class JobsView(APIView):
    parser_classes = [JobTextParser]
    permission_classes = [SignedInOrAnonymousStatus]  # the list; a submission needs a token

    @extend_schema(
        parameters=[
            OpenApiParameter(name, OpenApiTypes.STR, description=text)
            for name, text in LIST_PARAMETERS.items()
        ],
        responses={
            200: PolymorphicProxySerializer(
                "JobList",
                serializers=[JobSummarySerializer(many=True), JobPageSerializer],
                resource_type_field_name=None,
                many=False,
            ),
            **ERRORS,
        },
    )
    def get(self, request: Request, username: str | None = None) -> Response:
        # ``username``: OpenPAI's v1 ``/api/v1/user/<user>/jobs`` (jobs.api.v1).
        return Response(list_jobs(request, owner=username))

    @extend_schema(
        request={"text/yaml": OpenApiTypes.STR, "application/json": OpenApiTypes.OBJECT},
        parameters=[
            OpenApiParameter("virtualCluster", OpenApiTypes.STR),
            OpenApiParameter("deployment", OpenApiTypes.STR),
        ],
        responses={202: SubmittedSerializer, 409: ErrorSerializer, **ERRORS},
    )
    def post(self, request: Request, username: str | None = None) -> Response:
        if username is not None and username != request.user.get_username():
            message = f"{request.user.get_username()} may not submit jobs as {username}"
            return Response(
                {"code": "ForbiddenUserError", "message": message},
                status=status.HTTP_403_FORBIDDEN,
            )
        text = request.data
        try:
            job = lifecycle.submit(
                request.user,
                text if isinstance(text, str) else "",
                virtual_cluster=request.query_params.get("virtualCluster") or None,
                deployment=request.query_params.get("deployment") or None,
            )
        except lifecycle.SubmitError as exc:
            codes = {
                400: "InvalidProtocolError",
                403: "ForbiddenUserError",
                409: "ConflictJobError",
            }
            return Response(
                {
                    "code": codes.get(exc.status, "BadRequestError"),
                    "message": "; ".join(exc.errors),
                    "errors": exc.errors,
                },
                status=exc.status,
            )
        return Response(
            {
                "message": f"job {job.owner.username}~{job.name} submitted",
                "name": job.name,
                "user": job.owner.username,
                "state": job.state,
            },
            status=status.HTTP_202_ACCEPTED,
        )


WAIT = (
    f"seconds (0 to {MAX_WAIT_SECONDS}) to wait for the job to finish before answering: the"
    " answer comes when it has, or when they have passed; the job's latest attempt only"
)


class JobDetailView(APIView):
    permission_classes = [SignedInOrAnonymousStatus]

    def get_authenticators(self) -> list[Any]:
        waited = waited_caller(self.request)
        return [waited] if waited else super().get_authenticators()

    def get_throttles(self) -> list[Any]:
        return [] if waited_caller(self.request) else super().get_throttles()

    @extend_schema(
        parameters=[OpenApiParameter("wait", int, description=WAIT)],
        responses={200: JobDetailSerializer, **ERRORS},
    )
    def get(
        self, request: Request, username: str, name: str, attempt: int | None = None
    ) -> Response:
        if attempt is None:
            wait_seconds(request.query_params)  # 400 here; jobs.api.waiting waits
            seen, current, tasks = latest_of(request.user, username, name)
        else:
            seen = job_view_for(request.user, username, name)
            attempts = JobAttempt.objects.filter(job=seen.job)
            current = attempts.order_by("-number").first()
            if attempt == pending_attempt(seen.job, [current] if current else []):
                current = None  # OpenPAI answers a waiting job's next attempt: no task yet
            else:
                current = get_object_or_404(attempts, number=attempt)
            tasks = list(current.tasks.all()) if current else []
        base_url = api_base_url(request)
        return Response(job_detail(seen.job, current, tasks, full=seen.full, base_url=base_url))


def latest_of(
    user: AbstractBaseUser | AnonymousUser, username: str, name: str
) -> tuple[JobView, JobAttempt | None, list[Task]]:
    """What a client polling a job reads: the tasks of its latest attempt with the attempt and
    the job, in one query (each attempt starts with its tasks). Where there was no task yet,
    the job, then its attempt, then that attempt's tasks: an attempt that started after the
    first read comes with its tasks. Http404 where ``user`` may not list the job."""
    jobs_named = listable_jobs(user).filter(named(username, name))  # none or one
    latest = JobAttempt.objects.filter(job__in=jobs_named).order_by("-number").values("id")[:1]
    tasks = list(
        Task.objects.filter(attempt=Subquery(latest)).select_related(
            "attempt__job__owner", "attempt__job__virtual_cluster"
        )
    )
    if tasks:
        return view_of(user, tasks[0].attempt.job), tasks[0].attempt, tasks
    seen = job_view_for(user, username, name)
    current = seen.job.attempts.order_by("-number").first()
    return seen, current, list(current.tasks.all()) if current else []


class JobSchemaView(APIView):
    """The JSON Schema of the v2 job format, for editors (public, like the protocol itself)."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]

    @extend_schema(responses={(200, "application/schema+json"): OpenApiTypes.OBJECT})
    def get(self, request: Request) -> Response:
        return Response(json_schema(), content_type="application/schema+json")
