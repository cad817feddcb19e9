from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Register the Celery tasks in every process, not only in the worker (whose
        # autodiscovery imports them): ``jobs.wakeup`` sends them by name, and with
        # CELERY_TASK_ALWAYS_EAGER runs them in place, which needs them registered. In
        # ``ready``, as Django wants: the tasks' modules import models.
        from jobs import tasks  # noqa: F401
