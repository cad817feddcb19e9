"""The ``/api/v1/*`` paths OpenPAI's Python SDK (openpaisdk) calls, as the v2 operations where
the answer has the same shape: a user's jobs (list, submit, detail, ssh, Stop); a token and a
user are ``accounts.api.v1``'s; the virtual clusters, with v1's numbers-only resources.
OpenPAI's deployments put ``/rest-server`` before them, which portal.apipaths takes off."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse, JsonResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apikit.openapi import ERRORS
from jobs.access import job_for
from jobs.api.actions import ExecutionTypeView
from jobs.api.negotiation import ViewChoosesType
from jobs.api.serializers import VirtualClusterSerializer
from jobs.api.task_views import JobSshView
from jobs.api.vcs import VirtualClustersView, VirtualClusterView
from jobs.api.views import JobDetailView, JobsView
from protocol import dump_yaml, mask_secrets


@extend_schema_view(get=extend_schema(operation_id="v1_user_jobs_list"))
class V1UserJobsView(JobsView):
    """A user's jobs (``GET``, the v2 list's filters too) and a submission (``POST``, as
    ``POST /api/v2/jobs``: v1 JSON or v2 YAML; only as oneself) under
    ``/api/v1/user/<user>/jobs``."""


def log_folder(url: str) -> str:
    """A task's ``containerLog`` as OpenPAI's v1 gave it, the folder of the task's logs:
    openpaisdk appends ``user.pai.stdout/?start=0`` (or ``stderr``) to it (job.py
    ``JobStatusParser.single_task_logs``), which names the same log here (task_views)."""
    folder, _, _ = url.rpartition("/")
    return f"{folder}/" if url else ""


class V1JobDetailView(JobDetailView):
    """``GET /api/v1/user/<user>/jobs/<job>``: the v2 detail, each ``containerLog`` the
    folder of the task's logs, as v1's (the log manager's) was."""

    def get(
        self, request: Request, username: str, name: str, attempt: int | None = None
    ) -> Response:
        answer = super().get(request, username, name, attempt)
        for role in answer.data["taskRoles"].values():
            for task in role["taskStatuses"]:
                task["containerLog"] = log_folder(task["containerLog"])
        return answer


class V1JobSshView(JobSshView):
    """``GET /api/v1/user/<user>/jobs/<job>/ssh``: v1's ``containers`` and ``keyPair``."""


# What OpenPAI's v1 ``getConfig`` offers, in its order of preference (``req.accepts``).
CONFIG_TYPES = ["application/json", "text/yaml", "application/yaml", "application/x-yaml"]


class V1JobConfigView(APIView):
    """``GET /api/v1/user/<user>/jobs/<job>/config``: the job's config, secrets masked, as
    OpenPAI's v1 answered it: JSON (openpaisdk reads it with ``.json()``), YAML to a client
    whose ``Accept`` prefers it; the owner and admins only, as ``/api/v2/.../config``."""

    content_negotiation_class = ViewChoosesType

    @extend_schema(
        operation_id="v1_job_config",
        responses={
            (200, "application/json"): OpenApiTypes.OBJECT,
            (200, "text/yaml"): OpenApiTypes.STR,
            **ERRORS,
        },
    )
    def get(self, request: Request, username: str, name: str) -> HttpResponse:
        config = mask_secrets(job_for(request.user, username, name).protocol)
        preferred = request._request.get_preferred_type(CONFIG_TYPES) or CONFIG_TYPES[0]
        if preferred != CONFIG_TYPES[0]:
            return HttpResponse(dump_yaml(config), content_type="text/yaml")
        return JsonResponse(config)


class V1ExecutionTypeView(ExecutionTypeView):
    """``PUT /api/v1/user/<user>/jobs/<job>/executionType``."""


def numbers_only(vc: dict[str, Any]) -> dict[str, Any]:
    """openpaisdk subtracts every key of ``resourcesUsed`` from ``resourcesTotal``: v1's
    resources were numbers only, so ``gpuTypes`` (a mapping) is left out here."""
    return {
        key: (
            {k: v for k, v in value.items() if k != "gpuTypes"}
            if key.startswith("resources") and isinstance(value, dict)
            else value
        )
        for key, value in vc.items()
    }


class V1ResourcesSerializer(serializers.Serializer[dict[str, object]]):
    cpu = serializers.IntegerField()
    memory = serializers.IntegerField()
    gpu = serializers.IntegerField()
    vCores = serializers.IntegerField()
    GPUs = serializers.IntegerField()


class V1VirtualClusterSerializer(VirtualClusterSerializer):
    resourcesUsed = V1ResourcesSerializer()
    resourcesBorrowed = V1ResourcesSerializer()
    resourcesGuaranteed = V1ResourcesSerializer()
    resourcesTotal = V1ResourcesSerializer()


V1_VC_MAP = {
    "type": "object",
    "additionalProperties": {"$ref": "#/components/schemas/V1VirtualCluster"},
}


class V1VirtualClustersView(VirtualClustersView):
    @extend_schema(operation_id="v1_virtual_clusters_list", responses={200: V1_VC_MAP, **ERRORS})
    def get(self, request: Request) -> Response:
        answer = super().get(request)
        answer.data = {name: numbers_only(vc) for name, vc in answer.data.items()}
        return answer


class V1VirtualClusterView(VirtualClusterView):
    http_method_names = ["get", "head", "options"]

    @extend_schema(responses={200: V1VirtualClusterSerializer, **ERRORS})
    def get(self, request: Request, name: str) -> Response:
        answer = super().get(request, name)
        if answer.status_code == status.HTTP_200_OK:
            answer.data = numbers_only(answer.data)
        return answer
