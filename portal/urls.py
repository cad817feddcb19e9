from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

import portal.converters  # noqa: F401  (registers <username:...>)
import portal.views
from accounts.oidc_views import (
    CallbackView,
    LoginPageView,
    LogoutPageView,
    SignInView,
)
from accounts.views import account, new_application_token, revoke_token
from portal.apidocs import ApiDocsView
from portal.favicon import favicon
from portal.metrics import metrics
from portal.scheduler_status import scheduler_status

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
    path("api/v1/", include("accounts.api.v1_urls")),
    path("api/v1/", include("jobs.api.v1_urls")),
    path("api/v2/", include("accounts.api.urls")),
    path("api/v2/", include("jobs.api.urls")),
    path("api/v2/", include("clusters.api.urls")),
    path("api/v2/", include("notify.api_urls")),  # by name: portal imports no notify
    path("", include("clusters.urls")),
    path("", include("jobs.cluster_urls")),
    path("account/", account, name="account"),
    path("account/tokens/new/", new_application_token, name="account-new-token"),
    path("account/tokens/<int:token_id>/revoke/", revoke_token, name="account-revoke-token"),
    path("account/", include("notify.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", ApiDocsView.as_view(), name="api-docs"),
]
handler400 = "apikit.errors.bad_request"
handler404 = "apikit.errors.not_found"
