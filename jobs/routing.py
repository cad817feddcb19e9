from django.urls import path

from jobs.consumers import JobListNewsConsumer, JobNewsConsumer
from jobs.terminal import TerminalConsumer

websocket_urlpatterns = [
    path("ws/jobs/", JobListNewsConsumer.as_asgi()),
    path("ws/jobs/<int:job_id>/", JobNewsConsumer.as_asgi()),
    path("ws/tasks/<int:task_id>/terminal/", TerminalConsumer.as_asgi()),
]
