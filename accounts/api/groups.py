"""Groups in OpenPAI's REST shape (Django's ``Group``): ``/api/v2/groups[/<group>]``,
``/api/v2/groups/<group>/userlist`` and a user's ``/group`` and ``/grouplist``.
Anyone signed in reads groups; admins change them and read their members."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api.users import PERSON_WRITES, error, forbidden, is_admin, no_user
from apikit.openapi import ERRORS, MessageSerializer

User = get_user_model()
GROUP_NAME = r"^[\w.@+-]+$"


def no_group(name: str) -> Response:
    return error("NoGroupError", f"group {name} is not found", 404)


class GroupSerializer(serializers.Serializer[dict[str, Any]]):
    groupname = serializers.RegexField(GROUP_NAME, max_length=150)
    description = serializers.CharField(required=False, allow_blank=True, max_length=1000)
    externalName = serializers.CharField(required=False, allow_blank=True, max_length=150)
    extension = serializers.DictField(required=False)


class UpdateGroupSerializer(serializers.Serializer[dict[str, Any]]):
    data = GroupSerializer()
    patch = serializers.BooleanField(required=False, default=False)


# OpenPAI's default group: every user is in it. Ours is built in unless a group of that name
# was created, which then takes its place.
DEFAULT_GROUP = "default"
DEFAULT_DESCRIPTION = "every user of the cluster (built in)"


def group_info(group: Group) -> dict[str, Any]:
    return {"groupname": group.name, "description": "", "externalName": "", "extension": {}}


def is_built_in(name: str) -> bool:
    """Whether ``name`` is the built-in default group (no created group holds the name)."""
    return name == DEFAULT_GROUP and not Group.objects.filter(name=DEFAULT_GROUP).exists()


def built_in_default() -> dict[str, Any] | None:
    """The built-in default group, unless a real group holds its name."""
    if Group.objects.filter(name=DEFAULT_GROUP).exists():
        return None
    info = group_info(Group(name=DEFAULT_GROUP))
    return {**info, "description": DEFAULT_DESCRIPTION}


class GroupsView(APIView):
    permission_classes = PERSON_WRITES

    @extend_schema(responses={200: GroupSerializer(many=True), **ERRORS})
    def get(self, request: Request) -> Response:
        groups = [group_info(g) for g in Group.objects.order_by("name")]
        default = built_in_default()
        return Response(groups + [default] if default else groups)

    @extend_schema(request=GroupSerializer, responses={201: MessageSerializer, **ERRORS})
    def post(self, request: Request) -> Response:
        if not is_admin(request.user):
            return forbidden()
        form = GroupSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        name = form.validated_data["groupname"]
        # Two identical requests at once: get_or_create's loser finds the winner's row.
        _, created = Group.objects.get_or_create(name=name)
        if not created:
            return error("ConflictGroupError", f"group {name} already exists", 409)
        return Response({"message": "group is created successfully"}, status=201)

    @extend_schema(request=UpdateGroupSerializer, responses={201: MessageSerializer, **ERRORS})
    def put(self, request: Request) -> Response:
        """Groups carry only their name here: an update checks the group exists."""
        if not is_admin(request.user):
            return forbidden()
        form = UpdateGroupSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        name = form.validated_data["data"]["groupname"]
        if not Group.objects.filter(name=name).exists():
            return no_group(name)
        return Response({"message": f"update group {name} successfully."}, status=201)


class GroupView(APIView):
    permission_classes = PERSON_WRITES

    @extend_schema(responses={200: GroupSerializer, **ERRORS})
    def get(self, request: Request, group: str) -> Response:
        row = Group.objects.filter(name=group).first()
        if row:
            return Response(group_info(row))
        default = built_in_default() if group == DEFAULT_GROUP else None
        return Response(default) if default else no_group(group)

    @extend_schema(responses={201: MessageSerializer, **ERRORS})
    def delete(self, request: Request, group: str) -> Response:
        if not is_admin(request.user):
            return forbidden()
        deleted, _ = Group.objects.filter(name=group).delete()
        if not deleted:
            return no_group(group)
        return Response({"message": "group is removed successfully"}, status=201)


class MemberSerializer(serializers.Serializer[dict[str, Any]]):
    username = serializers.CharField()
    clusterAdmin = serializers.BooleanField()


class GroupUsersView(APIView):
    @extend_schema(responses={200: MemberSerializer(many=True), **ERRORS})
    def get(self, request: Request, group: str) -> Response:
        if not is_admin(request.user):
            return forbidden()
        row = Group.objects.filter(name=group).first()
        if row is not None:
            users = row.user_set.order_by("username")
        elif group == DEFAULT_GROUP:
            users = User.objects.filter(is_active=True).order_by("username")
        else:
            return no_group(group)
        return Response([{"username": u.username, "clusterAdmin": u.is_staff} for u in users])


class GroupNameSerializer(serializers.Serializer[dict[str, str]]):
    groupname = serializers.CharField(max_length=150)


def changed_by_admin(
    request: Request, username: str, form_class: type[serializers.Serializer[Any]]
) -> tuple[Any, dict[str, Any]] | Response:
    """The user an admin changes and the request's checked body, or the Response that refuses
    (403 to a non-admin, 400 for the body, 404 for the user)."""
    if not is_admin(request.user):
        return forbidden()
    form = form_class(data=request.data)
    form.is_valid(raise_exception=True)
    user = User.objects.filter(username=username).first()
    return (user, form.validated_data) if user is not None else no_user(username)


class UserGroupView(APIView):
    """``PUT`` adds the user to a group, ``DELETE`` takes them out (admin)."""

    permission_classes = PERSON_WRITES

    def change(self, request: Request, username: str, *, join: bool) -> Response:
        found = changed_by_admin(request, username, GroupNameSerializer)
        if isinstance(found, Response):
            return found
        user, data = found
        name = data["groupname"]
        group = Group.objects.filter(name=name).first()
        if group is None and is_built_in(name):
            # Every user is in the built-in default group already (OpenPAI puts every user in
            # its default group): joining it changes nothing; leaving it cannot be done.
            if not join:
                return error(
                    "ForbiddenUserError",
                    f"groupname: every user is in the built-in group {name}; create a group "
                    f"named {name} to choose its members",
                    403,
                )
            return Response({"message": f"User {username} is added into group {name}"}, 201)
        if group is None:
            return no_group(name)
        if join:
            user.groups.add(group)
            message = f"User {username} is added into group {group.name}"
        else:
            user.groups.remove(group)
            message = f"User {username} is removed from group {group.name}"
        return Response({"message": message}, status=201)

    @extend_schema(request=GroupNameSerializer, responses={201: MessageSerializer, **ERRORS})
    def put(self, request: Request, username: str) -> Response:
        return self.change(request, username, join=True)

    @extend_schema(request=GroupNameSerializer, responses={201: MessageSerializer, **ERRORS})
    def delete(self, request: Request, username: str) -> Response:
        return self.change(request, username, join=False)


class GroupListSerializer(serializers.Serializer[dict[str, Any]]):
    grouplist = serializers.ListField(child=serializers.CharField(max_length=150), max_length=1000)


class UserGroupListView(APIView):
    """Replace the user's groups. ``default`` is always granted while it is the built-in group
    (every user is in it, as every OpenPAI user is in its default group), so OpenPAI's
    ``["default"]`` works here too: it leaves the user in no created group."""

    permission_classes = PERSON_WRITES

    @extend_schema(request=GroupListSerializer, responses={201: MessageSerializer, **ERRORS})
    def put(self, request: Request, username: str) -> Response:
        found = changed_by_admin(request, username, GroupListSerializer)
        if isinstance(found, Response):
            return found
        user, data = found
        names = data["grouplist"]
        groups = list(Group.objects.filter(name__in=names))
        # ``default`` not found among the created groups is the built-in one: nothing to set.
        missing = sorted(set(names) - {g.name for g in groups} - {DEFAULT_GROUP})
        if missing:
            return no_group(missing[0])
        with transaction.atomic():
            user.groups.set(groups)
        return Response({"message": "update user grouplist successfully."}, status=201)
