"""Storages (``GET /api/v2/storages[/<name>]``: the ones the caller may use) and the backend's
nodes (``GET /api/v2/kubernetes/nodes``: admins; a Kubernetes-style NodeList whatever the
backend), in OpenPAI's shapes."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apikit.openapi import ERRORS
from clusters import capacity
from clusters.models import Node, Storage
from clusters.registry import get_backend


class StorageSummarySerializer(serializers.Serializer[dict[str, Any]]):
    name = serializers.CharField()
    share = serializers.BooleanField()
    volumeName = serializers.CharField()
    default = serializers.BooleanField()


class StorageListSerializer(serializers.Serializer[dict[str, Any]]):
    storages = StorageSummarySerializer(many=True)


class StorageDetailSerializer(StorageSummarySerializer):
    type = serializers.ChoiceField(choices=["nfs", "other"])
    data = serializers.DictField()
    readOnly = serializers.BooleanField()
    mountOptions = serializers.ListField(child=serializers.CharField())


def summary(storage: Storage) -> dict[str, Any]:
    return {
        "name": storage.name,
        "share": True,
        "volumeName": storage.claim_name or storage.name,
        "default": storage.open_to_all,
    }


def detail(storage: Storage) -> dict[str, Any]:
    if storage.kind == Storage.NFS:
        kind, data = "nfs", {"server": storage.server, "path": storage.path}
    elif storage.kind == Storage.PVC:
        kind, data = "other", {"claimName": storage.claim_name}
    else:
        kind, data = "other", {"path": storage.path}
    return {
        **summary(storage),
        "type": kind,
        "data": data,
        "readOnly": storage.read_only,
        "mountOptions": [],
    }


def usable(request: Request) -> list[Storage]:
    rows = Storage.objects.prefetch_related("users", "groups")
    return [s for s in rows if s.usable_by(request.user)]


class StoragesView(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("default", OpenApiTypes.BOOL, description="defaults only")],
        responses={200: StorageListSerializer, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        rows = usable(request)
        if request.query_params.get("default") in ("true", "True", "1"):
            rows = [s for s in rows if s.open_to_all]
        return Response({"storages": [summary(s) for s in rows]})


class StorageView(APIView):
    @extend_schema(responses={200: StorageDetailSerializer, **ERRORS})
    def get(self, request: Request, name: str) -> Response:
        storage = Storage.objects.filter(name=name).first()
        if storage is None:
            message = f"storage {name} is not found"
            return Response({"code": "NoStorageError", "message": message}, status=404)
        if not storage.usable_by(request.user):
            message = f"user {request.user.get_username()} is not allowed to access {name}"
            return Response({"code": "ForbiddenUserError", "message": message}, status=403)
        return Response(detail(storage))


def node_item(node: Node) -> dict[str, Any]:
    resources = {
        "cpu": str(node.cpu),
        "memory": f"{node.memory_mb}Mi",
        settings.K8S_GPU_RESOURCE: str(sum(node.gpus.values())),
    }
    return {
        "metadata": {
            "name": node.name,
            "labels": {settings.K8S_GPU_TYPE_LABEL: ",".join(sorted(node.gpus))},
        },
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
        "gpuTypes": dict(node.gpus),
        "updatedTime": node.updated_at.isoformat(),
    }


class NodeListSerializer(serializers.Serializer[dict[str, Any]]):
    kind = serializers.CharField()
    apiVersion = serializers.CharField()
    items = serializers.ListField(child=serializers.DictField())


class KubernetesNodesView(APIView):
    """The backend's nodes as last seen (asked of the backend when none is cached yet)."""

    @extend_schema(responses={200: NodeListSerializer, **ERRORS})
    def get(self, request: Request) -> Response:
        if not request.user.is_staff:
            message = "only an admin may list nodes"
            return Response({"code": "ForbiddenUserError", "message": message}, status=403)
        nodes = list(Node.objects.all()) or capacity.refresh(get_backend())
        return Response(
            {"kind": "NodeList", "apiVersion": "v1", "items": [node_item(n) for n in nodes]}
        )
