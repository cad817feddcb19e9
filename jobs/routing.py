from django.urls import path

from jobs.consumers import JobNewsConsumer

websocket_urlpatterns = [path("ws/jobs/<int:job_id>/", JobNewsConsumer.as_asgi())]
