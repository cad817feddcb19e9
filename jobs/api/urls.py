from django.urls import path

from jobs.api.views import JobDetailView, JobSchemaView, JobsView

urlpatterns = [
    path("jobs", JobsView.as_view(), name="api-jobs"),
    path("job-protocol/schema.json", JobSchemaView.as_view(), name="api-job-schema"),
    path("jobs/<username:username>~<str:name>", JobDetailView.as_view(), name="api-job"),
    path(
        "jobs/<username:username>~<str:name>/attempts/<int:attempt>",
        JobDetailView.as_view(),
        name="api-job-attempt",
    ),
]
