"""A job's config, attempts, events and Stop, in OpenPAI's paths; owner and admins only."""

from __future__ import annotations

from typing import Any

from django.db import DatabaseError, connection
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apikit.openapi import ERRORS, ErrorSerializer, MessageSerializer
from jobs import lifecycle
from jobs.access import is_admin, job_for, job_view_for, listable_jobs, summary_reason
from jobs.api.negotiation import ViewChoosesType
from jobs.api.openpai import api_base_url, epoch_ms, job_detail
from jobs.api.serializers import HealthSerializer, JobAttemptSerializer, JobEventsSerializer
from jobs.models import Job, JobAttempt
from protocol import dump_yaml, mask_secrets


class JobConfigView(APIView):
    """The job as v2 YAML (v1 jobs converted), secrets masked."""

    content_negotiation_class = ViewChoosesType  # YAML is what it answers: no 406 for asking

    @extend_schema(responses={(200, "text/yaml"): OpenApiTypes.STR, **ERRORS})
    def get(self, request: Request, username: str, name: str) -> HttpResponse:
        job = job_for(request.user, username, name)
        return HttpResponse(dump_yaml(mask_secrets(job.protocol)), content_type="text/yaml")


class ExecutionTypeSerializer(serializers.Serializer[dict[str, str]]):
    value = serializers.ChoiceField(choices=["START", "STOP"])


class ExecutionTypeView(APIView):
    """``{"value": "STOP"}`` stops a waiting or running job (202; a stopping one is stopping
    already, 202 too); a job that has already finished has nothing to stop (409)."""

    @extend_schema(
        request=ExecutionTypeSerializer,
        responses={202: MessageSerializer, 409: ErrorSerializer, **ERRORS},
    )
    def put(self, request: Request, username: str, name: str) -> Response:
        listed = listable_jobs(request.user).filter(owner__username=username, name=name)
        if listed.exclude(owner_id=request.user.pk).exists() and not is_admin(request.user):
            # OpenPAI's answer to a change of another user's job this user can see in lists;
            # a job they cannot see stays 404 (job_for).
            message = f"{request.user.get_username()} may not change job {username}~{name}"
            return Response(
                {"code": "ForbiddenUserError", "message": message},
                status=status.HTTP_403_FORBIDDEN,
            )
        job = job_for(request.user, username, name)
        form = ExecutionTypeSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        if form.validated_data["value"] == "START":
            # OpenPAI sets the framework's executionType to Start and answers 202: a job that
            # waits or runs has started already, and a finished one is not run again (its
            # framework stays completed), so nothing changes here either.
            if job.is_final:
                message = (
                    f"execute job {job.name} successfully: it has finished ({job.state}) and "
                    "is not run again; submit a clone to rerun it"
                )
            else:
                message = f"execute job {job.name} successfully: it is started already"
            return Response(
                {"status": status.HTTP_202_ACCEPTED, "message": message},
                status=status.HTTP_202_ACCEPTED,
            )
        if not lifecycle.stop(job, request.user):
            job.refresh_from_db(fields=["state"])
            if job.is_final:
                message = f"job {job.name} has already finished ({job.state}): nothing to stop"
                return Response(
                    {"code": "ConflictJobError", "message": message},
                    status=status.HTTP_409_CONFLICT,
                )
            message = f"job {job.name} is stopping already"
        else:
            message = f"execute job {job.name} successfully: it is stopping"
        return Response({"message": message}, status=status.HTTP_202_ACCEPTED)


def pending_attempt(job: Job, attempts: list[JobAttempt]) -> int | None:
    """The index of the attempt a waiting job is about to start, as OpenPAI reports it: its
    latest attempt is the framework as it stands, before any pod of that attempt exists."""
    latest = max((a.number for a in attempts), default=-1)
    return latest + 1 if job.state == "WAITING" else None


def attempt_detail(
    job: Job,
    attempt: JobAttempt | None,
    latest: int,
    number: int | None = None,
    *,
    full: bool = True,
    base_url: str = "",
) -> dict[str, Any]:
    """One attempt in OpenPAI's shape; ``attempt`` None is the pending attempt ``number``."""
    tasks = list(attempt.tasks.all()) if attempt else []
    detail = job_detail(job, attempt, tasks, full=full, base_url=base_url)
    status = detail["jobStatus"]
    return {
        "jobName": job.name,
        "userName": job.owner.username,
        "state": attempt.state if attempt else job.state,
        "attemptIndex": attempt.number if attempt else number,
        "maxAttemptCount": int(job.protocol.get("jobRetryCount", 0)) + 1,
        # An integer in OpenPAI's contract: the submission time until the job has started.
        "jobStartedTime": epoch_ms(job.started_at or job.created_at),
        "attemptStartedTime": epoch_ms(attempt.created_at) if attempt else None,
        "attemptCompletedTime": epoch_ms(attempt.completed_at) if attempt else None,
        "exitCode": attempt.exit_code if attempt else None,
        "exitPhrase": status["appExitSpec"]["phrase"] if status["appExitSpec"] else None,
        "exitType": status["appExitType"],
        "appExitSpec": status["appExitSpec"],
        "appExitMessages": status["appExitMessages"],
        "appExitTriggerMessage": status["appExitTriggerMessage"],
        "appExitTriggerTaskRoleName": status["appExitTriggerTaskRoleName"],
        "appExitTriggerTaskIndex": status["appExitTriggerTaskIndex"],
        "appExitDiagnostics": (
            (attempt.reason if attempt else job.reason)
            if full
            else summary_reason(attempt.reason if attempt else job.reason)
        ),
        "totalGpuNumber": job.gpu_count,
        "totalTaskNumber": job.task_count,
        "totalTaskRoleNumber": len(job.protocol["taskRoles"]),
        "taskRoles": detail["taskRoles"],
        "isLatest": attempt is None or attempt.number == latest,
    }


class JobAttemptsView(APIView):
    """Every attempt of a job (a waiting job's pending attempt last, as OpenPAI's latest), or
    one by its index."""

    @extend_schema(responses={200: JobAttemptSerializer(many=True), **ERRORS})
    def get(self, request: Request, username: str, name: str, attempt: int | None = None) -> Any:
        seen = job_view_for(request.user, username, name)
        job = seen.job
        shown = {"full": seen.full, "base_url": api_base_url(request)}
        attempts = list(JobAttempt.objects.filter(job=job).prefetch_related("tasks"))
        pending = pending_attempt(job, attempts)
        latest = max((a.number for a in attempts), default=-1) if pending is None else pending
        if attempt is None:
            listed = [attempt_detail(job, a, latest, **shown) for a in attempts]
            if pending is not None:
                listed.append(attempt_detail(job, None, latest, pending, **shown))
            return Response(listed)
        if attempt == pending:
            return Response(attempt_detail(job, None, latest, pending, **shown))
        chosen = get_object_or_404(JobAttempt.objects.filter(job=job), number=attempt)
        return Response(attempt_detail(job, chosen, latest, **shown))


class JobAttemptsHealthView(APIView):
    """OpenPAI's check that its attempt history store answers: ours is the database. Public
    there (its web portal asks without a token), and it reveals nothing of the job."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]

    @extend_schema(responses={200: HealthSerializer, 501: HealthSerializer})
    def get(self, request: Request, username: str, name: str) -> Response:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
        except DatabaseError as exc:
            body = {"isHealthy": False, "message": f"the job history database: {exc}"}
            return Response(body, status=status.HTTP_501_NOT_IMPLEMENTED)
        return Response({"isHealthy": True, "message": "ok"})


WARNING_KINDS = {"warning", "preempted"}
EVENT_TYPES = ("Normal", "Warning")


def event_type(kind: str, message: str) -> str:
    """OpenPAI's (Kubernetes') event ``type``: Warning for what went wrong, else Normal."""
    failed = message.startswith(("failed", "FAILED")) or " failed" in message
    return "Warning" if kind in WARNING_KINDS or failed else "Normal"


def openpai_event(job: Job, event: dict[str, Any], uid: str) -> dict[str, Any]:
    """One event in OpenPAI's shape (its job events come from Kubernetes), with ours kept."""
    role, _, index = str(event["task"]).rpartition("-")
    return {
        **event,
        "uid": uid,
        "frameworkName": f"{job.owner.username}~{job.name}",
        "taskroleName": role or None,
        "taskIndex": int(index) if index.isdigit() else None,
        "type": event_type(event["kind"], event["message"]),
        "reason": event["kind"],
        "firstTimestamp": event["time"],
        "lastTimestamp": event["time"],
        "count": 1,
        "sourceComponent": "portal",
    }


class JobEventsView(APIView):
    """What happened to the job and its tasks, oldest first, including why it waits, as
    OpenPAI answers it: ``{totalCount, data}``; ``type=Normal|Warning`` keeps one type."""

    @extend_schema(
        parameters=[OpenApiParameter("type", OpenApiTypes.STR, enum=EVENT_TYPES)],
        responses={200: JobEventsSerializer, **ERRORS},
    )
    def get(self, request: Request, username: str, name: str) -> Response:
        job = job_for(request.user, username, name)
        wanted = request.query_params.get("type")
        if wanted is not None and wanted not in EVENT_TYPES:
            raise serializers.ValidationError(
                {"type": f"must be Normal or Warning, got {wanted!r}"}
            )
        events = [
            openpai_event(job, event.as_dict(), f"event-{event.pk}") for event in job.events.all()
        ]
        if job.state == "WAITING":
            waiting = {"time": None, "attempt": None, "task": "", "kind": "waiting"}
            events.append(openpai_event(job, {**waiting, "message": job.reason}, "waiting"))
        if wanted:
            events = [e for e in events if e["type"] == wanted]
        return Response(
            {"name": job.name, "state": job.state, "totalCount": len(events), "data": events}
        )
