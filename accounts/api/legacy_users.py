"""OpenPAI's older user paths, ``/api/v2/user[/<user>/<field>]`` (its routes/v2/user.js),
which clients written before ``/api/v2/users`` still call: the list, create, read and delete
are the same operations as ``/api/v2/users``; each field has its own ``PUT`` here."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api.groups import UserGroupListView, UserGroupView
from accounts.api.users import (
    PERSON_WRITES,
    User,
    UsersView,
    UserView,
    checked_password,
    error,
    forbidden,
    is_admin,
    no_user,
    set_virtual_clusters,
)
from apikit.openapi import ERRORS, MessageSerializer


class LegacyUsersView(UsersView):
    """``GET``/``POST /api/v2/user``: as ``/api/v2/users``."""


class LegacyUserView(UserView):
    """``GET``/``DELETE /api/v2/user/<user>``: as ``/api/v2/users/<user>``."""


class LegacyUserGroupListView(UserGroupListView):
    """``PUT /api/v2/user/<user>/grouplist``: as ``/api/v2/users/<user>/grouplist``."""


class LegacyUserGroupView(UserGroupView):
    """``PUT``/``DELETE /api/v2/user/<user>/group``: as ``/api/v2/users/<user>/group``."""


class PasswordSerializer(serializers.Serializer[dict[str, Any]]):
    oldPassword = serializers.CharField(required=False, max_length=4096, trim_whitespace=False)
    newPassword = serializers.CharField(min_length=6, max_length=4096, trim_whitespace=False)


class EmailSerializer(serializers.Serializer[dict[str, Any]]):
    email = serializers.EmailField(allow_blank=True)


class AdminSerializer(serializers.Serializer[dict[str, Any]]):
    admin = serializers.BooleanField()


@extend_schema_field(
    {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
)
class VirtualClustersField(serializers.Field):  # type: ignore[type-arg]
    """OpenPAI's older ``virtualCluster``: a comma-separated string, or a list."""

    def to_internal_value(self, data: Any) -> list[str]:
        names = data.split(",") if isinstance(data, str) else data
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise serializers.ValidationError("a comma-separated string or a list of names")
        if len(names) > 1000:
            raise serializers.ValidationError("at most 1000 virtual clusters")
        return [n.strip() for n in names if n.strip()]


class UserVirtualClustersSerializer(serializers.Serializer[dict[str, Any]]):
    virtualCluster = VirtualClustersField()


def target_user(request: Request, username: str, *, admin_only: bool) -> Any:
    """The user to change, or the Response that refuses: admins change anyone, a user only
    themself (and not where ``admin_only``)."""
    if not is_admin(request.user) and (admin_only or username != request.user.get_username()):
        return forbidden()
    user = User.objects.filter(username=username).first()
    return user if user is not None else no_user(username)


def updated(user: Any) -> Response:
    return Response({"message": f"update user {user.username} successfully"}, status=201)


# ``PUT /api/v2/user/<user>/<field>``: the user to change (``target_user``), the body checked by
# ``form``, then ``change``; it answers OpenPAI's "update user ... successfully". (A comment, not
# a docstring: the OpenAPI schema would describe every field's PUT with it.)
class LegacyFieldView(APIView):
    permission_classes = PERSON_WRITES
    form: type[serializers.Serializer[dict[str, Any]]]
    admin_only = False

    def put(self, request: Request, username: str) -> Response:
        user = target_user(request, username, admin_only=self.admin_only)
        if isinstance(user, Response):
            return user
        form = self.form(data=request.data)
        form.is_valid(raise_exception=True)
        refused = self.change(request, user, form.validated_data)
        return refused or updated(user)

    def change(self, request: Request, user: Any, data: dict[str, Any]) -> Response | None:
        """Change the user's field; a Response when it refuses."""
        raise NotImplementedError


def documented(form: type[serializers.Serializer[dict[str, Any]]]) -> Any:
    """The OpenAPI description of a ``LegacyFieldView``'s ``PUT`` with ``form`` as its body."""
    return extend_schema_view(
        put=extend_schema(request=form, responses={201: MessageSerializer, **ERRORS})
    )


@documented(PasswordSerializer)
class LegacyPasswordView(LegacyFieldView):
    """A user changes their password with the old one; an admin sets anyone's."""

    form = PasswordSerializer

    def change(self, request: Request, user: Any, data: dict[str, Any]) -> Response | None:
        if not is_admin(request.user) and not user.check_password(data.get("oldPassword", "")):
            return error("IncorrectPasswordError", "oldPassword: it is not right", 400)
        user.set_password(checked_password(data["newPassword"], user))
        user.save(update_fields=["password"])
        return None


@documented(EmailSerializer)
class LegacyEmailView(LegacyFieldView):
    form = EmailSerializer

    def change(self, request: Request, user: Any, data: dict[str, Any]) -> Response | None:
        user.email = data["email"]
        user.save(update_fields=["email"])
        return None


@documented(AdminSerializer)
class LegacyAdminView(LegacyFieldView):
    form = AdminSerializer
    admin_only = True

    def change(self, request: Request, user: Any, data: dict[str, Any]) -> Response | None:
        if user.pk == request.user.pk and not data["admin"]:
            return error("RemoveAdminError", "admin: you may not remove your own admin", 403)
        user.is_staff = data["admin"]
        user.save(update_fields=["is_staff"])
        return None


@documented(UserVirtualClustersSerializer)
class LegacyVirtualClusterView(LegacyFieldView):
    form = UserVirtualClustersSerializer
    admin_only = True

    def change(self, request: Request, user: Any, data: dict[str, Any]) -> Response | None:
        with transaction.atomic():
            set_virtual_clusters(user, data["virtualCluster"])
        return None
