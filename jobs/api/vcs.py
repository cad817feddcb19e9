"""Virtual clusters in OpenPAI's REST shape, with their jobs' use:
``GET /api/v2/virtual-clusters[/<name>]``, and ``PUT`` / ``DELETE`` for admins. A user sees the
virtual clusters they may use (``usable_by``, as the pages); any other is 404. Their status,
use over time and the SKU types are ``clusters.api.vcs``'s."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apikit.openapi import ERRORS, MessageSerializer
from clusters.api.vcs import error, quota_shape, refused_change
from clusters.limits import Limit
from clusters.models import VirtualCluster
from clusters.overview import VCView
from clusters.quota import quota_of
from clusters.resources import Resources
from clusters.vc_changes import delete, quota_problems
from jobs.api.serializers import VirtualClusterSerializer
from jobs.vc_usage import overview


def shape(r: Resources | Limit, ceiling: Limit | None = None) -> dict[str, Any]:
    """OpenPAI's resource counts, always numbers: a resource without a limit counts as the
    ``ceiling`` (the cluster's capacity: all an unlimited quota can guarantee), or 0 when even
    that is unknown. ``quota`` (see ``vc_info``) keeps the limits as set, null for none."""
    top = ceiling or Limit()

    def count(value: int | None, most: int | None) -> int:
        return value if value is not None else (most or 0)

    gpus = r.gpus if r.gpus is not None else (top.gpus or {})
    cpu, gpu = count(r.cpu, top.cpu), sum(gpus.values())
    # OpenPAI's keys (cpu, memory, gpu) and those of its published contract (swagger.yaml:
    # vCores, memory, GPUs), which clients written against that contract read.
    return {
        "cpu": cpu,
        "memory": count(r.memory_mb, top.memory_mb),
        "gpu": gpu,
        "vCores": cpu,
        "GPUs": gpu,
        "gpuTypes": dict(sorted(gpus.items())),
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
        "maxCapacity": vc.max_capacity,
        "dedicated": False,
        "status": "STOPPED" if vc.stopped else "RUNNING",
        # Not in OpenPAI: why the guarantee can no longer be met (the cluster shrank), if so.
        "guaranteeUnmet": view.unmet,
    }


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
        usable = set(VirtualCluster.objects.usable_by(request.user).values_list("id", flat=True))
        return Response({v.vc.name: vc_info(v, capacity) for v in views if v.vc.id in usable})


MAX_COUNT = 2**31 - 1  # what the database keeps


def count_or_none(value: Any, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise ValueError(f"{field}: a whole number from 0 to {MAX_COUNT}, or null")
    return value


def parse_quota(data: Any) -> Limit:
    """``resourcesGuaranteed`` as sent: vCores, memory and gpuTypes, each null for no limit."""
    if not isinstance(data, dict):
        raise ValueError("resourcesGuaranteed: an object with vCores, memory and gpuTypes")
    gpus = data.get("gpuTypes")
    if gpus is not None:
        if not isinstance(gpus, dict):
            raise ValueError(
                "resourcesGuaranteed.gpuTypes: an object of GPU type -> count, or null"
            )
        for kind, n in gpus.items():
            if not kind.strip():
                raise ValueError("resourcesGuaranteed.gpuTypes: a GPU type needs a name")
            if n is None:
                raise ValueError(f"resourcesGuaranteed.gpuTypes.{kind}: a count, not null")
            count_or_none(n, f"resourcesGuaranteed.gpuTypes.{kind}")
    return Limit(
        count_or_none(data.get("vCores"), "resourcesGuaranteed.vCores"),
        count_or_none(data.get("memory"), "resourcesGuaranteed.memory"),
        gpus,
    )


FLAGS = {"strictFifo": "strict_fifo", "openToAll": "open_to_all"}


def parse_put(data: Any, current: VirtualCluster | None) -> tuple[Limit, dict[str, Any]]:
    """The quota and the other fields a ``PUT`` body sets; ValueError naming a bad field.
    Fields it does not know (such as the counts a ``GET`` returns) are ignored."""
    if not isinstance(data, dict):
        raise ValueError("body: a JSON object")
    if "resourcesGuaranteed" in data:
        quota = parse_quota(data["resourcesGuaranteed"])
    else:
        quota = quota_of(current) if current else Limit()
    fields: dict[str, Any] = {}
    if "description" in data:
        if not isinstance(data["description"], str):
            raise ValueError("description: a string")
        fields["description"] = data["description"]
    if "maxCapacity" in data:
        value = data["maxCapacity"]
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 100:
            raise ValueError("maxCapacity: a number from 0 to 100 (percent of the cluster)")
        fields["max_capacity"] = float(value)
    for key, attr in FLAGS.items():
        if key in data:
            if not isinstance(data[key], bool):
                raise ValueError(f"{key}: true or false, not {data[key]!r}")
            fields[attr] = data[key]
    return quota, fields


class VirtualClusterView(APIView):
    @extend_schema(responses={200: VirtualClusterSerializer, **ERRORS})
    def get(self, request: Request, name: str) -> Response:
        views, capacity = overview([name])
        if not views or not views[0].vc.usable_by(request.user):  # private: as if not there
            return error("NoVirtualClusterError", f"no virtual cluster named {name!r}", 404)
        return Response(vc_info(views[0], capacity))

    @extend_schema(
        request=VirtualClusterSerializer,
        responses={200: VirtualClusterSerializer, 201: VirtualClusterSerializer, **ERRORS},
    )
    def put(self, request: Request, name: str) -> Response:
        denied = refused_change(request)
        if denied:
            return denied
        current = VirtualCluster.objects.filter(name=name).first()
        try:
            quota, fields = parse_put(request.data, current)
        except ValueError as exc:
            return error("BadRequestError", str(exc), 400)
        problems = quota_problems(name, quota, current.pk if current else None)
        if problems:
            return error("BadRequestError", "; ".join(problems), 400)
        with transaction.atomic():
            vc = current or VirtualCluster(name=name)
            vc.cpu, vc.memory_mb, vc.gpus = quota.cpu, quota.memory_mb, quota.gpus
            for attr, value in fields.items():
                setattr(vc, attr, value)
            vc.save()
        views, capacity = overview([name])
        code = status.HTTP_200_OK if current else status.HTTP_201_CREATED
        return Response(vc_info(views[0], capacity), status=code)

    @extend_schema(responses={200: MessageSerializer, 409: MessageSerializer, **ERRORS})
    def delete(self, request: Request, name: str) -> Response:
        denied = refused_change(request)
        if denied:
            return denied
        vc = VirtualCluster.objects.filter(name=name).first()
        if vc is None:
            return error("NoVirtualClusterError", f"no virtual cluster named {name!r}", 404)
        problem = delete(vc)
        if problem:
            return error("ConflictVirtualClusterError", problem, 409)
        return Response({"message": f"virtual cluster {name} deleted"})
