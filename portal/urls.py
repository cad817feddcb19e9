from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

import portal.converters  # noqa: F401  (registers <username:...>)
import portal.views
from portal.accounts.api import (
    ApplicationTokenView,
    AuthnInfoView,
    InfoView,
    LoginView,
    LogoutView,
    TokensView,
    TokenView,
)
from portal.accounts.oidc_views import (
    CallbackView,
    LoginPageView,
    LogoutPageView,
    SignInView,
    api_oidc_login,
    api_oidc_logout,
)
from portal.accounts.views import account, new_application_token, revoke_token
from portal.apidocs import ApiDocsView
from portal.favicon import favicon
from portal.metrics import metrics
from portal.scheduler_status import scheduler_status

api_auth = [
    path("authn/basic/login", LoginView.as_view()),
    path("authn/basic/logout", LogoutView.as_view()),
    path("authn/info", AuthnInfoView.as_view()),
    path("authn/oidc/login", api_oidc_login),
    path("authn/oidc/logout", api_oidc_logout),
]
api_accounts = [
    path("info", InfoView.as_view()),
    path("tokens", TokensView.as_view()),
    path("tokens/application", ApplicationTokenView.as_view()),
    path("tokens/<str:token>", TokenView.as_view()),
]

urlpatterns = [
    path("", portal.views.home, name="home"),
    path("favicon.ico", favicon, name="favicon"),
    path("scheduler-status", scheduler_status, name="scheduler-status"),
    path("metrics", metrics, name="metrics"),
    path("login/", LoginPageView.as_view(), name="login"),
    path("logout/", LogoutPageView.as_view(), name="logout"),
    # Single sign-on (OpenID Connect): the provider's redirect URI is /oidc/callback/.
    path("oidc/authenticate/", SignInView.as_view(), name="oidc-authenticate"),
    path("oidc/callback/", CallbackView.as_view(), name="oidc-callback"),
    path("admin/", admin.site.urls),
    path("jobs/", include("jobs.urls")),
    path("api/v1/", include(api_auth)),
    path("api/v1/", include("jobs.api.v1_urls")),
    path("api/v2/", include(api_auth)),
    path("api/v2/", include(api_accounts)),
    path("api/v2/", include("portal.accounts.api_urls")),
    path("api/v2/", include("jobs.api.urls")),
    path("api/v2/", include("clusters.api_urls")),
    path("api/v2/", include("notify.api_urls")),  # by name: portal imports no notify
    path("", include("clusters.urls")),
    path("account/", account, name="account"),
    path("account/tokens/new/", new_application_token, name="account-new-token"),
    path("account/tokens/<int:token_id>/revoke/", revoke_token, name="account-revoke-token"),
    path("account/", include("notify.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", ApiDocsView.as_view(), name="api-docs"),
]
handler400 = "portal.api.bad_request"
handler404 = "portal.api.not_found"
