"""OpenPAI's login API: ``POST /api/v2/authn/basic/login`` -> ``{token, user, admin}``."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import authenticate, get_user_model, logout
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.ldap_backend import DirectoryDown
from accounts.models import ApiToken, hash_token
from accounts.oidc_views import authn_info, authn_method
from apikit.openapi import (
    ERRORS,
    ApplicationTokenSerializer,
    AuthnInfoSerializer,
    ClusterInfoSerializer,
    LoggedInSerializer,
    MessageSerializer,
    TokensSerializer,
    error,
)
from apikit.permissions import NoApplications


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

    @extend_schema(
        responses={
            200: LoggedInSerializer,
            **ERRORS,
            503: error("the lab's directory (LDAP) did not answer: try again shortly"),
        }
    )
    def post(self, request: Request) -> Response:
        form = LoginSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            user = authenticate(request, username=data["username"], password=data["password"])
        except DirectoryDown as down:
            return Response(
                {"code": "DirectoryUnavailableError", "message": down.messages[0]},
                status=status.HTTP_503_SERVICE_UNAVAILABLE,
            )
        if user is None:
            return refused_login(data["username"])
        seconds = data.get("expiration", settings.API_TOKEN_DEFAULT_SECONDS)
        _, token = ApiToken.objects.issue(user, seconds)
        return Response({"token": token, "user": user.username, "admin": user.is_staff})


def refused_login(username: str) -> Response:
    """OpenPAI's 400s (rest-server controllers/v2/token.js ``get``): ``NoUserError`` for a name
    no active user has, ``IncorrectPasswordError`` for a wrong password. With
    ``API_LOGIN_HIDES_UNKNOWN_USERS`` both answer the latter, so that the login tells no one
    which names exist. Either way a caller's attempts count against ``API_RATE_ANON``."""
    known = get_user_model().objects.filter(username=username, is_active=True).exists()
    if known or settings.API_LOGIN_HIDES_UNKNOWN_USERS:
        body = {"code": "IncorrectPasswordError", "message": "Password is incorrect."}
    else:
        body = {"code": "NoUserError", "message": f"User {username} is not found."}
    return Response(body, status=status.HTTP_400_BAD_REQUEST)


def bearer_row(request: Request) -> ApiToken | None:
    return request.auth if isinstance(request.auth, ApiToken) else None


class LogoutView(APIView):
    """Revoke the token this call carries (a browser session is logged out instead)."""

    @extend_schema(responses={200: MessageSerializer, **ERRORS})
    def delete(self, request: Request) -> Response:
        row = bearer_row(request)
        if row is not None:
            row.delete()
        else:
            logout(request._request)
        return Response({"message": "Logout successfully"})


class AuthnInfoView(APIView):
    authentication_classes: list[type] = []
    permission_classes = [AllowAny]

    @extend_schema(responses={200: AuthnInfoSerializer})
    def get(self, request: Request) -> Response:
        return Response(authn_info(request.path))


# Signed in with a person's token or session: OpenPAI's routes/token.js forbids every token
# operation to an application token (checkNotApplication).
PERSON_ONLY = [IsAuthenticated, NoApplications]


class TokensView(APIView):
    """My tokens: listed by their first characters (the rest is stored only hashed)."""

    permission_classes = PERSON_ONLY

    @extend_schema(responses={200: TokensSerializer, **ERRORS})
    def get(self, request: Request) -> Response:
        rows = ApiToken.objects.active().filter(user=request.user).order_by("-created_at")
        return Response(
            {
                "tokens": [f"{row.prefix}…" for row in rows],
                "details": [
                    {
                        "token": f"{row.prefix}…",
                        "kind": row.kind,
                        "createdTime": row.created_at.isoformat(),
                        "expiredTime": row.expires_at.isoformat(),
                    }
                    for row in rows
                ],
            }
        )


class ApplicationTokenView(APIView):
    permission_classes = PERSON_ONLY

    @extend_schema(request=None, responses={200: ApplicationTokenSerializer, **ERRORS})
    def post(self, request: Request) -> Response:
        _, token = ApiToken.objects.issue(
            request.user, settings.API_APPLICATION_TOKEN_SECONDS, kind="application"
        )
        return Response({"token": token, "application": True})


class TokenView(APIView):
    permission_classes = PERSON_ONLY

    @extend_schema(responses={200: MessageSerializer, **ERRORS})
    def delete(self, request: Request, token: str) -> Response:
        mine = ApiToken.objects.filter(user=request.user)
        prefix = token.rstrip("…")
        rows = mine.filter(digest=hash_token(token)) or (
            mine.filter(prefix=prefix) if len(prefix) == 8 else mine.none()
        )
        if not rows:
            return Response(
                {"code": "NoTokenError", "message": "token: no such token of yours"},
                status=status.HTTP_404_NOT_FOUND,
            )
        rows.delete()
        return Response({"message": "revoke successfully"})


class InfoSerializer(ClusterInfoSerializer):
    launcherType = serializers.ChoiceField(choices=["k8s"])
    backend = serializers.CharField(help_text="the backend that runs the tasks")


class InfoView(APIView):
    """OpenPAI's cluster info. ``launcherType`` is always ``k8s`` (OpenPAI knows only ``yarn``
    and ``k8s``): whatever runs the tasks, this API speaks the k8s launcher's dialect (v2 jobs,
    ``/kubernetes/nodes``); ``backend`` says what actually runs them."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]

    @extend_schema(responses={200: InfoSerializer})
    def get(self, request: Request) -> Response:
        return Response(
            {
                "name": "PAI RESTful API",
                "version": "v1.0.1",
                "launcherType": "k8s",
                "authnMethod": authn_method(),
                "backend": settings.CLUSTER_BACKEND,
            }
        )
