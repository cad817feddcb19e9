from django.urls import path

from jobs.api.views import JobDetailView, JobsView

urlpatterns = [
    path("jobs", JobsView.as_view(), name="api-jobs"),
    path("jobs/<username:username>~<str:name>", JobDetailView.as_view(), name="api-job"),
    path(
        "jobs/<username:username>~<str:name>/attempts/<int:attempt>",
        JobDetailView.as_view(),
        name="api-job-attempt",
    ),
]
