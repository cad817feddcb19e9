from django.urls import path

from jobs.api.actions import (
    ExecutionTypeView,
    JobAttemptsHealthView,
    JobAttemptsView,
    JobConfigView,
    JobEventsView,
)
from jobs.api.cluster_views import AlertsView, PodsView
from jobs.api.task_views import (
    JobSshView,
    JobTagView,
    TaskAttemptLogsView,
    TaskAttemptsView,
    TaskLogView,
)
from jobs.api.usage_views import JobUsageView
from jobs.api.vcs import VirtualClustersView, VirtualClusterView
from jobs.api.views import JobDetailView, JobSchemaView, JobsView
from jobs.api.waiting import waiting

urlpatterns = [
    path("virtual-clusters", VirtualClustersView.as_view(), name="api-virtual-clusters"),
    path("virtual-clusters/<str:name>", VirtualClusterView.as_view(), name="api-virtual-cluster"),
    path("jobs", JobsView.as_view(), name="api-jobs"),
    path("job-protocol/schema.json", JobSchemaView.as_view(), name="api-job-schema"),
    path("jobs/<username:username>~<str:name>", waiting(JobDetailView.as_view()), name="api-job"),
    path(
        "jobs/<username:username>~<str:name>/attempts/<int:attempt>",
        JobDetailView.as_view(),
        name="api-job-attempt",
    ),
]

JOB = "jobs/<username:username>~<str:name>"
urlpatterns += [
    path(f"{JOB}/config", JobConfigView.as_view(), name="api-job-config"),
    path(f"{JOB}/executionType", ExecutionTypeView.as_view(), name="api-job-execution-type"),
    path(f"{JOB}/job-attempts", JobAttemptsView.as_view(), name="api-job-attempts"),
    path(
        f"{JOB}/job-attempts/healthz",
        JobAttemptsHealthView.as_view(),
        name="api-job-attempts-healthz",
    ),
    path(f"{JOB}/job-attempts/<int:attempt>", JobAttemptsView.as_view(), name="api-job-attempt-n"),
    path(f"{JOB}/events", JobEventsView.as_view(), name="api-job-events"),
    path(f"{JOB}/ssh", JobSshView.as_view(), name="api-job-ssh"),
    path(f"{JOB}/tag", JobTagView.as_view(), name="api-job-tag"),
    path(f"{JOB}/usage", JobUsageView.as_view(), name="api-job-usage"),
    path(
        f"{JOB}/attempts/<int:attempt>/tasks/<str:task>/logs/<str:stream>",
        TaskLogView.as_view(),
        name="api-task-log",
    ),
]
# OpenPAI's task attempts and their log lists (routes/v2/job.js; its web portal's conn.js).
TASK = f"{JOB}/attempts/<int:attempt>/taskRoles/<str:role>/taskIndex/<int:index>/attempts"
urlpatterns += [
    path(TASK, TaskAttemptsView.as_view(), name="api-task-attempts"),
    path(
        f"{TASK}/<int:task_attempt>/logs",
        TaskAttemptLogsView.as_view(),
        name="api-task-attempt-logs",
    ),
]
urlpatterns += [
    path("kubernetes/pods", PodsView.as_view(), name="api-k8s-pods"),
    path("alerts", AlertsView.as_view(), name="api-alerts"),
]
