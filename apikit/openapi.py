"""What drf-spectacular needs to describe our API: the bearer token scheme, the error shapes
every endpoint shares, and the shapes of the account endpoints (the views build plain dicts;
these only describe them)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers


def nullable_int() -> serializers.IntegerField:
    return serializers.IntegerField(allow_null=True)


class BearerTokenScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = "accounts.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer"}


class LoggedInSerializer(serializers.Serializer[dict[str, object]]):
    token = serializers.CharField()
    user = serializers.CharField()
    admin = serializers.BooleanField()


class AuthnInfoSerializer(serializers.Serializer[dict[str, object]]):
    # OpenPAI's (rest-server routes/authn.js): "basic" or "OIDC", where and how to sign in.
    authn_type = serializers.ChoiceField(choices=["basic", "OIDC"])
    loginURI = serializers.CharField()
    loginURIMethod = serializers.ChoiceField(choices=["get", "post"])
    logoutURI = serializers.CharField(required=False, help_text="with OIDC: sign-out")
    authnMethod = serializers.ChoiceField(choices=["basic", "OIDC"])
    loginPath = serializers.CharField(help_text="the password login (local and LDAP accounts)")


class TokenDetailSerializer(serializers.Serializer[dict[str, object]]):
    token = serializers.CharField()
    kind = serializers.CharField()
    createdTime = serializers.CharField()
    expiredTime = serializers.CharField()


class TokensSerializer(serializers.Serializer[dict[str, object]]):
    tokens = serializers.ListField(child=serializers.CharField())
    details = TokenDetailSerializer(many=True)


class ApplicationTokenSerializer(serializers.Serializer[dict[str, object]]):
    token = serializers.CharField()
    application = serializers.BooleanField()


class ClusterInfoSerializer(serializers.Serializer[dict[str, object]]):
    name = serializers.CharField()
    version = serializers.CharField()
    launcherType = serializers.CharField()
    authnMethod = serializers.CharField()


class ErrorSerializer(serializers.Serializer[dict[str, object]]):
    code = serializers.CharField()
    message = serializers.CharField()
    errors = serializers.ListField(child=serializers.CharField(), required=False)


class MessageSerializer(serializers.Serializer[dict[str, object]]):
    message = serializers.CharField()


def error(description: str) -> OpenApiResponse:
    return OpenApiResponse(ErrorSerializer, description=description)


ERRORS = {
    400: error("bad input: every problem as `field: message`"),
    401: error("no or bad credentials"),
    403: error("not allowed"),
    404: error("no such object, or not yours"),
    429: error("too many requests (see Retry-After)"),
}
