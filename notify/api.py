"""``/api/v2/users/<name>/alerts`` (``me`` for oneself): a user's alert settings and last
deliveries (GET), changed by PUT (only the fields given); ``POST .../alerts/test`` sends a
test alert. A user reaches their own; an admin anyone's. The webhook secret is written, never
read back: ``webhookSecretSet`` says whether one is set."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api.users import PERSON_WRITES, forbidden, is_admin, no_user
from apikit.openapi import ERRORS, MessageSerializer
from notify import options
from notify.models import EVENTS
from notify.probe import send_probe
from protocol.notify_extras import MAX_WAITING_MINUTES

User = get_user_model()
FIELDS = {  # the API's name -> the model's
    "email": "email",
    "webhookUrl": "webhook_url",
    "webhookSecret": "webhook_secret",
    "events": "events",
    "waitingMinutes": "waiting_minutes",
}


class ChangeSerializer(serializers.Serializer[dict[str, Any]]):
    email = serializers.BooleanField(required=False)
    webhookUrl = serializers.CharField(required=False, allow_blank=True, max_length=2000)
    webhookSecret = serializers.CharField(
        required=False, allow_blank=True, max_length=256, trim_whitespace=False, write_only=True
    )
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=EVENTS), required=False, max_length=len(EVENTS)
    )
    waitingMinutes = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=MAX_WAITING_MINUTES
    )

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if isinstance(data, dict):
            unknown = sorted(str(key) for key in data if key not in FIELDS)
            if unknown:
                known = ", ".join(FIELDS)
                raise serializers.ValidationError({unknown[0]: f"unknown field; known: {known}"})
        return super().to_internal_value(data)


class DeliverySerializer(serializers.Serializer[dict[str, Any]]):
    id = serializers.CharField()
    event = serializers.CharField()
    channel = serializers.CharField()
    subject = serializers.CharField()
    job = serializers.CharField(allow_null=True)
    status = serializers.ChoiceField(choices=["pending", "sending", "sent", "failed"])
    attempts = serializers.IntegerField()
    createdTime = serializers.CharField()
    sentTime = serializers.CharField(allow_null=True)
    nextTryTime = serializers.CharField(allow_null=True)
    lastError = serializers.CharField(allow_blank=True)


class AlertSettingsSerializer(serializers.Serializer[dict[str, Any]]):
    email = serializers.BooleanField()
    emailAddress = serializers.CharField(allow_blank=True)
    emailAvailable = serializers.BooleanField()
    webhookUrl = serializers.CharField(allow_blank=True)
    webhookSecretSet = serializers.BooleanField()
    events = serializers.ListField(child=serializers.CharField())
    waitingMinutes = serializers.IntegerField(allow_null=True)
    defaultWaitingMinutes = serializers.IntegerField()
    availableEvents = serializers.ListField(child=serializers.CharField())
    deliveries = DeliverySerializer(many=True)


def person(request: Request, username: str) -> Any:
    """The user ``username`` names (``me``: the caller), or the Response refusing it."""
    if username in ("me", request.user.get_username()):
        return request.user
    if not is_admin(request.user):
        return forbidden()
    return User.objects.filter(username=username).first() or no_user(username)


class AlertSettingsView(APIView):
    permission_classes = PERSON_WRITES

    @extend_schema(responses={200: AlertSettingsSerializer, **ERRORS})
    def get(self, request: Request, username: str) -> Response:
        user = person(request, username)
        return user if isinstance(user, Response) else Response(options.describe(user))

    @extend_schema(request=ChangeSerializer, responses={200: AlertSettingsSerializer, **ERRORS})
    def put(self, request: Request, username: str) -> Response:
        user = person(request, username)
        if isinstance(user, Response):
            return user
        form = ChangeSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            if "email" in data:
                data["email"] = options.check_email(user, data["email"])
            if "webhookUrl" in data:
                data["webhookUrl"] = options.check_url(data["webhookUrl"])
            if "events" in data:
                data["events"] = options.check_events(user, data["events"])
            options.save(user, {FIELDS[key]: value for key, value in data.items()})
        except options.Invalid as exc:
            raise serializers.ValidationError({exc.field: str(exc)}) from None
        return Response(options.describe(user))


class AlertTestView(APIView):
    permission_classes = PERSON_WRITES

    @extend_schema(request=None, responses={202: MessageSerializer, **ERRORS})
    def post(self, request: Request, username: str) -> Response:
        user = person(request, username)
        if isinstance(user, Response):
            return user
        channels = send_probe(user)
        if not channels:
            message = "no channel is on: turn on e-mail or set a webhook first"
            return Response({"code": "BadRequestError", "message": message}, status=400)
        return Response({"message": f"a test alert is on its way by {' and '.join(channels)}"}, 202)
