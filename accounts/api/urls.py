from django.urls import path

import apikit.openapi  # noqa: F401  (registers the bearer scheme with drf-spectacular)
from accounts.api.auth import (
    ApplicationTokenView,
    AuthnInfoView,
    InfoView,
    LoginView,
    LogoutView,
    TokensView,
    TokenView,
)
from accounts.api.groups import (
    GroupsView,
    GroupUsersView,
    GroupView,
    UserGroupListView,
    UserGroupView,
)
from accounts.api.legacy_users import (
    LegacyAdminView,
    LegacyEmailView,
    LegacyPasswordView,
    LegacyUserGroupListView,
    LegacyUserGroupView,
    LegacyUsersView,
    LegacyUserView,
    LegacyVirtualClusterView,
)
from accounts.api.users import MeView, UsersView, UserView
from accounts.oidc_views import api_oidc_login, api_oidc_logout

# Signing in and out, under /api/v1/ too (v1_urls).
auth_urlpatterns = [
    path("authn/basic/login", LoginView.as_view()),
    path("authn/basic/logout", LogoutView.as_view()),
    path("authn/info", AuthnInfoView.as_view()),
    path("authn/oidc/login", api_oidc_login),
    path("authn/oidc/logout", api_oidc_logout),
]

GROUP = "<str:group>"
urlpatterns = [
    *auth_urlpatterns,
    path("info", InfoView.as_view()),
    path("tokens", TokensView.as_view()),
    path("tokens/application", ApplicationTokenView.as_view()),
    path("tokens/<str:token>", TokenView.as_view()),
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
