"""``GET /api/v2/jobs/<user~job>/usage``: each task's CPU, memory, GPU utilisation and GPU
memory over time (``jobs.usage``), with its limits and warnings. Owner and admins only, as
the logs: another user who may list the job gets 404, as for them (``jobs.access.job_for``)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apikit.openapi import ERRORS
from jobs.access import job_for
from jobs.models import JobAttempt
from jobs.usage import FIELDS, job_usage


class UsageWarningSerializer(serializers.Serializer[dict[str, str]]):
    kind = serializers.ChoiceField(["idleGpu", "nearMemoryLimit"])
    message = serializers.CharField()


class TaskUsageSerializer(serializers.Serializer[dict[str, object]]):
    taskRole = serializers.CharField()
    taskIndex = serializers.IntegerField()
    state = serializers.CharField()
    cpu = serializers.IntegerField(help_text="the CPUs the task asked for")
    memoryMB = serializers.IntegerField(help_text="the task's memory limit")
    gpu = serializers.IntegerField(help_text="the GPUs the task asked for")
    points = serializers.ListField(
        child=serializers.ListField(child=serializers.FloatField(allow_null=True)),
        help_text=f"oldest first, each [{', '.join(FIELDS)}]: epoch milliseconds, CPU cores "
        "used, memory working set in MB, GPU utilisation in % and GPU memory in MB (null: "
        "not known, or no GPU)",
    )
    warnings = UsageWarningSerializer(many=True)


class JobUsageSerializer(serializers.Serializer[dict[str, object]]):
    attempt = serializers.IntegerField(allow_null=True)
    sampleSeconds = serializers.FloatField()
    fields = serializers.ListField(child=serializers.CharField())
    tasks = TaskUsageSerializer(many=True)


class JobUsageView(APIView):
    """The latest attempt's tasks (``?attempt=N`` another one), each with its usage samples:
    every few seconds for the last 10 minutes, one a minute until 6 hours, then one per 10
    minutes."""

    @extend_schema(
        parameters=[OpenApiParameter("attempt", OpenApiTypes.INT, description="the attempt")],
        responses={200: JobUsageSerializer, **ERRORS},
    )
    def get(self, request: Request, username: str, name: str) -> Response:
        job = job_for(request.user, username, name)
        attempts = JobAttempt.objects.filter(job=job)
        raw = request.query_params.get("attempt")
        if raw in (None, ""):
            attempt = attempts.order_by("-number").first()
        else:
            if not raw.isdigit() or len(raw) > 9:
                shown = raw if len(raw) <= 20 else f"{raw[:20]}..."
                raise serializers.ValidationError(
                    {"attempt": f"an attempt number (0, 1, ...), got {shown!r}"}
                )
            attempt = attempts.filter(number=int(raw)).first()
            if attempt is None:
                raise NotFound(
                    {"code": "NoJobError", "message": f"job {job.name} has no attempt {raw}"}
                )
        return Response(job_usage(job, attempt))
