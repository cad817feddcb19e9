"""OpenPAI's ``GET /api/v2/kubernetes/pods`` (admins) and ``GET /api/v2/alerts``."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apikit.openapi import ERRORS, error
from backends.base import BackendUnavailable
from clusters.registry import get_backend
from jobs.access import is_admin
from jobs.alerts import alerts_for
from jobs.pods import live_pods


class PodListSerializer(serializers.Serializer[dict[str, object]]):
    kind = serializers.CharField()
    apiVersion = serializers.CharField()
    metadata = serializers.DictField()
    items = serializers.ListField(child=serializers.DictField())


class PodsView(APIView):
    """Every live task as a pod, with its phase as the backend sees it now (admins)."""

    @extend_schema(
        parameters=[OpenApiParameter("namespace", OpenApiTypes.STR)],
        responses={200: PodListSerializer, 503: error("the backend does not answer"), **ERRORS},
    )
    def get(self, request: Request) -> Response:
        if not is_admin(request.user):
            message = "only an admin may list pods"
            return Response({"code": "ForbiddenUserError", "message": message}, status=403)
        namespace = request.query_params.get("namespace")
        if namespace is not None and len(namespace) > 253:
            raise serializers.ValidationError({"namespace": "at most 253 characters"})
        try:
            return Response(live_pods(get_backend(), namespace))
        except BackendUnavailable as exc:
            return Response(
                {"code": "UnavailableError", "message": f"the backend: {exc}"},
                status=status.HTTP_503_SERVICE_UNAVAILABLE,
            )


class AlertLabelsSerializer(serializers.Serializer[dict[str, object]]):
    alertname = serializers.CharField()
    severity = serializers.CharField()


class AlertSerializer(serializers.Serializer[dict[str, object]]):
    labels = AlertLabelsSerializer()
    annotations = serializers.DictField(child=serializers.CharField())
    startsAt = serializers.CharField()
    endsAt = serializers.CharField(allow_null=True)
    generatorURL = serializers.CharField(allow_blank=True)
    status = serializers.DictField()


class AlertsView(APIView):
    """Alerts: tasks killed for memory, jobs waiting long (a user's own; an admin's all),
    and for admins nodes not reporting and a backend that does not answer."""

    @extend_schema(responses={200: AlertSerializer(many=True), **ERRORS})
    def get(self, request: Request) -> Response:
        return Response(alerts_for(request.user, get_backend()))
