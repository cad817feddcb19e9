"""Virtual clusters in OpenPAI's REST shape, what needs no job: ``PUT .../<vc>/status`` (admins),
``GET .../<vc>/usage`` (its use over time) and ``GET /api/v2/cluster/sku-types``. A VC with its
jobs' use (``GET``, ``PUT``, ``DELETE /api/v2/virtual-clusters[/<name>]``) is ``jobs.api.vcs``'s.
A user sees the virtual clusters they may use (``usable_by``, as the pages); any other is 404."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apikit.openapi import ERRORS, MessageSerializer, nullable_int
from apikit.permissions import APPLICATIONS_NOT_ALLOWED, is_application
from clusters.capacity import cluster_capacity
from clusters.limits import Limit
from clusters.models import Node, VirtualCluster
from clusters.quota import quota_of
from clusters.usage import CHART_HOURS, SAMPLE_SECONDS, points


class QuotaSerializer(serializers.Serializer[dict[str, object]]):
    vCores = nullable_int()
    memory = nullable_int()
    gpuTypes = serializers.DictField(child=serializers.IntegerField(), allow_null=True)


def error(code: str, message: str, status_code: int) -> Response:
    return Response({"code": code, "message": message}, status=status_code)


def quota_shape(quota: Limit) -> dict[str, Any]:
    """The quota as set, in the shape ``PUT``'s ``resourcesGuaranteed`` takes (null: no limit)."""
    gpus = quota.gpus
    return {
        "vCores": quota.cpu,
        "memory": quota.memory_mb,
        "gpuTypes": None if gpus is None else dict(sorted(gpus.items())),
    }


def refused_change(request: Request) -> Response | None:
    """OpenPAI's checks on a virtual cluster's change (rest-server routes/v2/virtual-cluster.js:
    ``checkNotApplication``, then an admin's), with its texts; None when allowed."""
    if is_application(request):
        return error("ForbiddenUserError", APPLICATIONS_NOT_ALLOWED, 403)
    if not request.user.is_staff:
        return error("ForbiddenUserError", "Non-admin is not allow to do this operation.", 403)
    return None


class VirtualClusterStatusSerializer(serializers.Serializer[dict[str, str]]):
    vcStatus = serializers.ChoiceField(choices=["stopped", "running"])


class VirtualClusterStatusView(APIView):
    """OpenPAI's ``PUT /api/v2/virtual-clusters/<vc>/status`` (admin): ``{"vcStatus":
    "stopped"}`` makes the virtual cluster refuse new jobs, ``"running"`` admits them again;
    the jobs it holds go on either way."""

    @extend_schema(
        request=VirtualClusterStatusSerializer, responses={201: MessageSerializer, **ERRORS}
    )
    def put(self, request: Request, name: str) -> Response:
        denied = refused_change(request)
        if denied:
            return denied
        form = VirtualClusterStatusSerializer(data=request.data)
        if not form.is_valid():
            wanted = request.data.get("vcStatus") if isinstance(request.data, dict) else None
            message = f"vcStatus: 'stopped' or 'running', not {wanted!r}"
            return error("BadConfigurationError", message, 400)
        stopped = form.validated_data["vcStatus"] == "stopped"
        if not VirtualCluster.objects.filter(name=name).update(stopped=stopped):
            return error("NoVirtualClusterError", f"no virtual cluster named {name!r}", 404)
        verb = "stop" if stopped else "active"  # OpenPAI's messages
        return Response({"message": f"{verb} vc {name} successfully"}, status=201)


USAGE_COLUMNS = ["time", "cpu", "memoryMB", "gpus", "running", "waiting"]


class VirtualClusterUsageSerializer(serializers.Serializer[dict[str, object]]):
    name = serializers.CharField()
    hours = serializers.IntegerField()
    sampleSeconds = serializers.IntegerField()
    quota = QuotaSerializer(help_text="the guarantee as set now (null: no limit)")
    columns = serializers.ListField(child=serializers.CharField())
    points = serializers.ListField(
        child=serializers.ListField(child=serializers.IntegerField()),
        help_text="[epoch ms, cpu, memoryMB, gpus (all types), running jobs, waiting jobs]",
    )


def parse_hours(raw: str | None) -> int:
    """``hours``: a whole number from 1 to what is kept (``VC_USAGE_RETENTION_DAYS``)."""
    most: int = settings.VC_USAGE_RETENTION_DAYS * 24  # at least a day: 24 is always allowed
    if raw is None:
        return CHART_HOURS
    hours = int(raw) if raw.strip().isdecimal() else 0
    if not 1 <= hours <= most:
        raise ValueError(f"hours: a whole number of hours from 1 to {most}, not {raw!r}")
    return hours


class VirtualClusterUsageView(APIView):
    """``GET /api/v2/virtual-clusters/<vc>/usage?hours=24``: the virtual cluster's use over
    the last ``hours`` against its quota, oldest first (``clusters.usage``: a point a minute
    for the last day, one an hour before). Not in OpenPAI, which keeps no history (its
    Prometheus does); as the virtual cluster's own ``GET``, a private one is 404 to
    non-members."""

    @extend_schema(
        parameters=[OpenApiParameter("hours", OpenApiTypes.INT, description="from 1; default 24")],
        responses={200: VirtualClusterUsageSerializer, **ERRORS},
    )
    def get(self, request: Request, name: str) -> Response:
        vc = VirtualCluster.objects.filter(name=name).first()
        if vc is None or not vc.usable_by(request.user):  # private: as if not there
            return error("NoVirtualClusterError", f"no virtual cluster named {name!r}", 404)
        try:
            hours = parse_hours(request.query_params.get("hours"))
        except ValueError as exc:
            return error("BadRequestError", str(exc), 400)
        since = timezone.now() - timedelta(hours=hours)
        found = points([vc.id], since).get(vc.id, [])
        return Response(
            {
                "name": vc.name,
                "hours": hours,
                "sampleSeconds": int(SAMPLE_SECONDS),
                "quota": quota_shape(quota_of(vc)),
                "columns": USAGE_COLUMNS,
                "points": [
                    [p.epoch_ms, p.cpu, p.memory_mb, p.gpus, p.running, p.waiting] for p in found
                ],
            }
        )


def sku_types(nodes: list[Node]) -> dict[str, dict[str, int]]:
    """OpenPAI's SKU types: per GPU type, the share of a node that comes with one such GPU
    (the least on any node that has it, so a task sized by it fits anywhere). A cluster
    without GPUs has none, as OpenPAI without its HiveD scheduler."""
    units: dict[str, dict[str, int]] = {}
    for node in nodes:
        gpus_on_node = sum(node.gpus.values())
        for kind, count in node.gpus.items():
            if count <= 0:
                continue
            unit = {
                "cpu": node.cpu // gpus_on_node,
                "memory": node.memory_mb // gpus_on_node,
                "gpu": 1,
            }
            seen = units.get(kind)
            units[kind] = unit if seen is None else {k: min(seen[k], unit[k]) for k in unit}
    return dict(sorted(units.items()))


SKU_MAP = {
    "type": "object",
    "additionalProperties": {
        "type": "object",
        "properties": {k: {"type": "integer"} for k in ("cpu", "memory", "gpu")},
        "required": ["cpu", "memory", "gpu"],
    },
}


class SkuTypesView(APIView):
    """``GET /api/v2/cluster/sku-types``: ``{<GPU type>: {cpu, memory, gpu}}``."""

    @extend_schema(responses={200: SKU_MAP, **ERRORS})
    def get(self, request: Request) -> Response:
        cluster_capacity()  # caches the nodes when beat has not yet
        return Response(sku_types(list(Node.objects.all())))
