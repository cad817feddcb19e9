from django.urls import path

from notify import views

app_name = "notify"

urlpatterns = [
    path("alerts/", views.alert_settings, name="settings"),
    path("alerts/test/", views.send_test, name="test"),
]
