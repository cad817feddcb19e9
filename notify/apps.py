from django.apps import AppConfig


class NotifyConfig(AppConfig):
    name = "notify"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The job-event receiver, and the Celery tasks registered in every process (the
        # outbox queues them by name; with CELERY_TASK_ALWAYS_EAGER they run in place). In
        # ``ready``, as Django wants: both import models.
        from notify import signals, tasks  # noqa: F401
