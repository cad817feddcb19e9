from django.urls import path

from accounts.api.urls import auth_urlpatterns
from accounts.api.v1 import V1TokenView, V1UserView

urlpatterns = [
    *auth_urlpatterns,
    path("token", V1TokenView.as_view(), name="api-v1-token"),
    path("user/<username:username>", V1UserView.as_view(), name="api-v1-user"),
]
