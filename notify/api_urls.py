from django.urls import path

from notify.api import AlertSettingsView, AlertTestView

USER = "users/<username:username>"
urlpatterns = [
    path(f"{USER}/alerts", AlertSettingsView.as_view(), name="api-user-alerts"),
    path(f"{USER}/alerts/test", AlertTestView.as_view(), name="api-user-alerts-test"),
]
