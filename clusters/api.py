"""Virtual clusters in OpenPAI's REST shape: ``GET /api/v2/virtual-clusters[/<name>]``, and
``PUT`` / ``DELETE`` for admins."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from clusters.admission import quota_of
from clusters.edit import delete, delete_problem, quota_problems
from clusters.models import VirtualCluster
from clusters.overview import VCView, overview
from clusters.quota import Limit, Resources
from jobs.api.schemas import ERRORS, MessageSerializer, VirtualClusterSerializer


def error(code: str, message: str, status_code: int) -> Response:
    return Response({"code": code, "message": message}, status=status_code)


def shape(r: Resources | Limit, ceiling: Limit | None = None) -> dict[str, Any]:
    """OpenPAI's resource counts, always numbers: a resource without a limit counts as the
    ``ceiling`` (the cluster's capacity: all an unlimited quota can guarantee), or 0 when even
    that is unknown. ``quota`` (see ``vc_info``) keeps the limits as set, null for none."""
    top = ceiling or Limit()

    def count(value: int | None, most: int | None) -> int:
        return value if value is not None else (most or 0)

    gpus = r.gpus if r.gpus is not None else (top.gpus or {})
    return {
        "vCores": count(r.cpu, top.cpu),
        "memory": count(r.memory_mb, top.memory_mb),
        "GPUs": sum(gpus.values()),
        "gpuTypes": dict(sorted(gpus.items())),
    }


def quota_shape(quota: Limit) -> dict[str, Any]:
    """The quota as set, in the shape ``PUT``'s ``resourcesGuaranteed`` takes (null: no limit)."""
    gpus = quota.gpus
    return {
        "vCores": quota.cpu,
        "memory": quota.memory_mb,
        "gpuTypes": None if gpus is None else dict(sorted(gpus.items())),
    }


def percent(part: int | None, whole: int | None) -> float:
    """OpenPAI's capacity percentages, from vCores (an unlimited quota is 100%)."""
    if part is None or not whole:
        return 100.0
    return round(100.0 * part / whole, 2)


def vc_info(view: VCView, capacity: Limit) -> dict[str, Any]:
    vc = view.vc
    return {
        "description": vc.description,
        "resourcesUsed": shape(view.used),
        "resourcesBorrowed": shape(view.borrowed),
        "resourcesGuaranteed": shape(view.quota, capacity),
        "resourcesTotal": shape(capacity),
        "quota": quota_shape(view.quota),
        "numJobs": view.running + view.waiting,
        "numActiveJobs": view.running,
        "numPendingJobs": view.waiting,
        "strictFifo": vc.strict_fifo,
        "openToAll": vc.open_to_all,
        "capacity": percent(view.quota.cpu, capacity.cpu),
        "usedCapacity": percent(view.used.cpu, capacity.cpu),
        "maxCapacity": 100.0,
        "dedicated": False,
        "status": "RUNNING",
    }


class IsAdminForWrites:
    def check(self, request: Request) -> Response | None:
        if not request.user.is_staff:
            return error("ForbiddenUserError", "only an admin may change virtual clusters", 403)
        return None


VC_MAP = {
    "type": "object",
    "additionalProperties": {"$ref": "#/components/schemas/VirtualCluster"},
}


class VirtualClustersView(APIView):
    @extend_schema(
        responses={200: VC_MAP, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        views, capacity = overview()
        return Response({v.vc.name: vc_info(v, capacity) for v in views})


def int_or_none(data: dict[str, Any], key: str) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"resourcesGuaranteed.{key}: a whole number >= 0, or null")
    return value


def parse_quota(data: Any) -> Limit:
    if not isinstance(data, dict):
        raise ValueError("resourcesGuaranteed: an object with vCores, memory and gpuTypes")
    gpus = data.get("gpuTypes")
    if gpus is not None and (
        not isinstance(gpus, dict)
        or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
            for k, v in gpus.items()
        )
    ):
        raise ValueError("resourcesGuaranteed.gpuTypes: an object of GPU type -> count >= 0")
    return Limit(int_or_none(data, "vCores"), int_or_none(data, "memory"), gpus)


class VirtualClusterView(APIView):
    @extend_schema(responses={200: VirtualClusterSerializer, **ERRORS})
    def get(self, request: Request, name: str) -> Response:
        views, capacity = overview([name])
        if not views:
            return error("NoVirtualClusterError", f"no virtual cluster named {name!r}", 404)
        return Response(vc_info(views[0], capacity))

    @extend_schema(
        request=VirtualClusterSerializer,
        responses={200: VirtualClusterSerializer, 201: VirtualClusterSerializer, **ERRORS},
    )
    def put(self, request: Request, name: str) -> Response:
        denied = IsAdminForWrites().check(request)
        if denied:
            return denied
        data = request.data if isinstance(request.data, dict) else {}
        current = VirtualCluster.objects.filter(name=name).first()
        try:
            quota = (
                parse_quota(data["resourcesGuaranteed"])
                if "resourcesGuaranteed" in data
                else (quota_of(current) if current else Limit())
            )
        except ValueError as exc:
            return error("BadRequestError", str(exc), 400)
        problems = quota_problems(name, quota)
        if problems:
            return error("BadRequestError", "; ".join(problems), 400)
        with transaction.atomic():
            vc = current or VirtualCluster(name=name)
            vc.cpu, vc.memory_mb, vc.gpus = quota.cpu, quota.memory_mb, quota.gpus
            vc.description = str(data.get("description", vc.description))
            vc.strict_fifo = bool(data.get("strictFifo", vc.strict_fifo))
            vc.open_to_all = bool(data.get("openToAll", vc.open_to_all))
            vc.save()
        views, capacity = overview([name])
        code = status.HTTP_200_OK if current else status.HTTP_201_CREATED
        return Response(vc_info(views[0], capacity), status=code)

    @extend_schema(responses={200: MessageSerializer, 409: MessageSerializer, **ERRORS})
    def delete(self, request: Request, name: str) -> Response:
        denied = IsAdminForWrites().check(request)
        if denied:
            return denied
        vc = VirtualCluster.objects.filter(name=name).first()
        if vc is None:
            return error("NoVirtualClusterError", f"no virtual cluster named {name!r}", 404)
        problem = delete_problem(vc)
        if problem:
            return error("ConflictVirtualClusterError", problem, 409)
        delete(vc)
        return Response({"message": f"virtual cluster {name} deleted"})
