"""OpenPAI's login API: ``POST /api/v2/authn/basic/login`` -> ``{token, user, admin}``."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import authenticate
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.accounts.models import ApiToken


class LoginSerializer(serializers.Serializer[dict[str, object]]):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=4096, trim_whitespace=False)
    expiration = serializers.IntegerField(
        required=False,
        min_value=60,
        max_value=365 * 24 * 3600,
        help_text="Seconds the token stays valid.",
    )


class LoginView(APIView):
    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    serializer_class = LoginSerializer

    def post(self, request: Request) -> Response:
        form = LoginSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        user = authenticate(request, username=data["username"], password=data["password"])
        if user is None:
            return Response(
                {"code": "InvalidCredentialError", "message": "username or password is wrong"},
                status=status.HTTP_401_UNAUTHORIZED,
            )
        seconds = data.get("expiration", settings.API_TOKEN_DEFAULT_SECONDS)
        _, token = ApiToken.objects.issue(user, seconds)
        return Response({"token": token, "user": user.username, "admin": user.is_staff})
