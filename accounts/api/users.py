"""Users in OpenPAI's REST shape: ``/api/v2/users[/<user>|/me]``. Admins manage everyone;
a user reads and updates only their own profile. ``admin`` is ``is_staff``; a user's
``virtualCluster`` list sets their direct membership of those virtual clusters."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, transaction
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.removal import UserHasLiveJobs, remove_user
from apikit.openapi import ERRORS, ErrorSerializer, MessageSerializer
from apikit.permissions import NoApplicationWrites
from clusters.models import Storage, VirtualCluster

User = get_user_model()
NAME = r"^[\w.@+-]+$"
# Signed in, and an application token only reads (OpenPAI's checkNotApplication).
PERSON_WRITES = [IsAuthenticated, NoApplicationWrites]


def error(code: str, message: str, status: int) -> Response:
    return Response({"code": code, "message": message}, status=status)


def forbidden() -> Response:
    """OpenPAI's answer to a non-admin's admin operation, its text as its SDKs compare it
    (rest-server controllers/v2/user.js and group.js)."""
    return error("ForbiddenUserError", "Non-admin is not allow to do this operation.", 403)


def no_user(name: str) -> Response:
    return error("NoUserError", f"user {name} is not found", 404)


class UserInfoSerializer(serializers.Serializer[dict[str, Any]]):
    username = serializers.CharField()
    admin = serializers.BooleanField()
    virtualCluster = serializers.ListField(child=serializers.CharField())
    storageConfig = serializers.ListField(child=serializers.CharField())
    grouplist = serializers.ListField(child=serializers.CharField())
    email = serializers.CharField(allow_blank=True)
    extension = serializers.DictField()


def user_info(user: Any) -> dict[str, Any]:
    storages = [s.name for s in Storage.objects.all() if s.usable_by(user)]
    return {
        "username": user.username,
        "admin": user.is_staff,
        "virtualCluster": list(
            VirtualCluster.objects.usable_by(user).values_list("name", flat=True)
        ),
        "storageConfig": storages,
        "grouplist": sorted(user.groups.values_list("name", flat=True)),
        "email": user.email,
        "extension": {},
    }


class NewUserSerializer(serializers.Serializer[dict[str, Any]]):
    username = serializers.RegexField(NAME, max_length=150)
    password = serializers.CharField(min_length=6, max_length=4096, trim_whitespace=False)
    admin = serializers.BooleanField(required=False, default=False)
    email = serializers.EmailField(required=False, allow_blank=True, default="")
    virtualCluster = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False, max_length=1000
    )
    extension = serializers.DictField(required=False)


class UserChangeSerializer(serializers.Serializer[dict[str, Any]]):
    username = serializers.RegexField(NAME, max_length=150)
    email = serializers.EmailField(required=False, allow_blank=True)
    virtualCluster = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False, max_length=1000
    )
    admin = serializers.BooleanField(required=False)
    password = serializers.CharField(
        required=False, min_length=6, max_length=4096, trim_whitespace=False
    )
    extension = serializers.DictField(required=False)


class UpdateUserSerializer(serializers.Serializer[dict[str, Any]]):
    data = UserChangeSerializer()
    patch = serializers.BooleanField(required=False, default=False)


def set_virtual_clusters(user: Any, names: list[str]) -> None:
    found = list(VirtualCluster.objects.filter(name__in=names))
    missing = sorted(set(names) - {vc.name for vc in found})
    if missing:
        raise serializers.ValidationError(
            {"virtualCluster": f"no virtual cluster named {missing[0]!r}"}
        )
    user.virtual_clusters.set(found)


def checked_password(password: str, user: Any) -> str:
    try:
        validate_password(password, user)
    except DjangoValidationError as exc:
        raise serializers.ValidationError({"password": list(exc.messages)}) from None
    return password


def is_admin(user: AbstractBaseUser | AnonymousUser) -> bool:
    return bool(getattr(user, "is_staff", False))


class UsersView(APIView):
    permission_classes = PERSON_WRITES

    @extend_schema(responses={200: UserInfoSerializer(many=True), **ERRORS})
    def get(self, request: Request) -> Response:
        if not is_admin(request.user):
            return forbidden()
        users = User.objects.order_by("username").prefetch_related("groups")
        return Response([user_info(u) for u in users])

    @extend_schema(
        request=NewUserSerializer,
        responses={201: MessageSerializer, 409: ErrorSerializer, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        if not is_admin(request.user):
            return forbidden()
        form = NewUserSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        taken = error("ConflictUserError", f"user name {data['username']} already exists", 409)
        if User.objects.filter(username=data["username"]).exists():
            return taken
        try:
            with transaction.atomic():
                user = User(username=data["username"], email=data["email"], is_staff=data["admin"])
                user.set_password(checked_password(data["password"], user))
                user.save()
                set_virtual_clusters(user, data.get("virtualCluster", []))
        except IntegrityError:  # the same name, created by a request that ran alongside
            return taken
        return Response({"message": "User is created successfully"}, status=201)

    @extend_schema(request=UpdateUserSerializer, responses={201: MessageSerializer, **ERRORS})
    def put(self, request: Request) -> Response:
        if not is_admin(request.user):
            return forbidden()
        form = UpdateUserSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data["data"]
        user = User.objects.filter(username=data["username"]).first()
        if user is None:
            return no_user(data["username"])
        if user.pk == request.user.pk and data.get("admin") is False:
            return error("RemoveAdminError", "admin: you may not remove your own admin", 403)
        with transaction.atomic():
            if "email" in data:
                user.email = data["email"]
            if "admin" in data:
                user.is_staff = data["admin"]
            if "password" in data:
                user.set_password(checked_password(data["password"], user))
            user.save()
            if "virtualCluster" in data:
                set_virtual_clusters(user, data["virtualCluster"])
        return Response({"message": f"update user {user.username} successfully"}, status=201)


class UserView(APIView):
    permission_classes = PERSON_WRITES

    @extend_schema(responses={200: UserInfoSerializer, **ERRORS})
    def get(self, request: Request, username: str) -> Response:
        if not is_admin(request.user) and username != request.user.get_username():
            return forbidden()
        user = User.objects.filter(username=username).first()
        return Response(user_info(user)) if user else no_user(username)

    @extend_schema(responses={200: MessageSerializer, 409: ErrorSerializer, **ERRORS})
    def delete(self, request: Request, username: str) -> Response:
        if not is_admin(request.user):
            return forbidden()
        user = User.objects.filter(username=username).first()
        if user is None:
            return no_user(username)
        if user.pk == request.user.pk:
            return error("RemoveAdminError", "you may not remove yourself", 403)
        try:
            remove_user(user)
        except UserHasLiveJobs as exc:
            return error("ConflictUserError", str(exc), 409)
        return Response({"message": "user is removed successfully"})


class MyChangeSerializer(serializers.Serializer[dict[str, Any]]):
    username = serializers.CharField(required=False, max_length=150)
    email = serializers.EmailField(required=False, allow_blank=True)
    newPassword = serializers.CharField(
        required=False, min_length=6, max_length=4096, trim_whitespace=False
    )
    oldPassword = serializers.CharField(required=False, max_length=4096, trim_whitespace=False)


class UpdateMeSerializer(serializers.Serializer[dict[str, Any]]):
    data = MyChangeSerializer()
    patch = serializers.BooleanField(required=False, default=False)


class MeView(APIView):
    permission_classes = PERSON_WRITES

    @extend_schema(responses={200: UserInfoSerializer, **ERRORS})
    def get(self, request: Request) -> Response:
        return Response(user_info(request.user))

    @extend_schema(request=UpdateMeSerializer, responses={201: MessageSerializer, **ERRORS})
    def put(self, request: Request) -> Response:
        form = UpdateMeSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data["data"]
        user = request.user
        if data.get("username", user.get_username()) != user.get_username():
            return error("ForbiddenUserError", "data.username: you may only change yourself", 403)
        if "newPassword" in data:
            if not user.check_password(data.get("oldPassword", "")):
                return error("IncorrectPasswordError", "oldPassword: it is not right", 400)
            user.set_password(checked_password(data["newPassword"], user))
        if "email" in data:
            user.email = data["email"]
        user.save()
        return Response({"message": f"update user {user.get_username()} successfully"}, status=201)
