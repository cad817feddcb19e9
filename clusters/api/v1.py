"""The ``/api/v1/virtual-clusters[/<name>]`` paths OpenPAI's Python SDK (openpaisdk) calls, as
the v2 operations with v1's numbers-only resources."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from clusters.api.serializers import VirtualClusterSerializer
from clusters.api.vcs import VirtualClustersView, VirtualClusterView
from portal.openapi import ERRORS


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
