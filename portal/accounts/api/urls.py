from django.urls import path

import portal.openapi  # noqa: F401  (registers the bearer scheme with drf-spectacular)
from portal.accounts.groups_api import (
    GroupsView,
    GroupUsersView,
    GroupView,
    UserGroupListView,
    UserGroupView,
)
from portal.accounts.legacy_users_api import (
    LegacyAdminView,
    LegacyEmailView,
    LegacyPasswordView,
    LegacyUserGroupListView,
    LegacyUserGroupView,
    LegacyUsersView,
    LegacyUserView,
    LegacyVirtualClusterView,
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

# OpenPAI's older paths (routes/v2/user.js), for clients written before /users.
OLD_USER = "user/<username:username>"
urlpatterns += [
    path("user", LegacyUsersView.as_view(), name="api-old-users"),
    path(OLD_USER, LegacyUserView.as_view(), name="api-old-user"),
    path(f"{OLD_USER}/password", LegacyPasswordView.as_view(), name="api-old-user-password"),
    path(f"{OLD_USER}/email", LegacyEmailView.as_view(), name="api-old-user-email"),
    path(f"{OLD_USER}/admin", LegacyAdminView.as_view(), name="api-old-user-admin"),
    path(
        f"{OLD_USER}/virtualcluster",
        LegacyVirtualClusterView.as_view(),
        name="api-old-user-virtualcluster",
    ),
    path(f"{OLD_USER}/grouplist", LegacyUserGroupListView.as_view(), name="api-old-grouplist"),
    path(f"{OLD_USER}/group", LegacyUserGroupView.as_view(), name="api-old-user-group"),
]
