from django.urls import path

import portal.openapi  # noqa: F401  (registers the bearer scheme with drf-spectacular)
from portal.accounts.groups_api import (
    GroupsView,
    GroupUsersView,
    GroupView,
    UserGroupListView,
    UserGroupView,
)
from portal.accounts.users_api import MeView, UsersView, UserView

GROUP = "<str:group>"
urlpatterns = [
    path("users", UsersView.as_view(), name="api-users"),
    path("users/me", MeView.as_view(), name="api-user-me"),
    path("users/<username:username>", UserView.as_view(), name="api-user"),
    path("users/<username:username>/group", UserGroupView.as_view(), name="api-user-group"),
    path("users/<username:username>/grouplist", UserGroupListView.as_view(), name="api-grouplist"),
    path("groups", GroupsView.as_view(), name="api-groups"),
    path(f"groups/{GROUP}", GroupView.as_view(), name="api-group"),
    path(f"groups/{GROUP}/userlist", GroupUsersView.as_view(), name="api-group-users"),
]
