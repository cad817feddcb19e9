from django.urls import path

from jobs.api.v1 import (
    V1ExecutionTypeView,
    V1JobConfigView,
    V1JobDetailView,
    V1JobSshView,
    V1UserJobsView,
    V1VirtualClustersView,
    V1VirtualClusterView,
)

USER = "user/<username:username>"
JOB = f"{USER}/jobs/<str:name>"
urlpatterns = [
    path(f"{USER}/jobs", V1UserJobsView.as_view(), name="api-v1-user-jobs"),
    path(JOB, V1JobDetailView.as_view(), name="api-v1-job"),
    path(f"{JOB}/config", V1JobConfigView.as_view(), name="api-v1-job-config"),
    path(f"{JOB}/ssh", V1JobSshView.as_view(), name="api-v1-job-ssh"),
    path(f"{JOB}/executionType", V1ExecutionTypeView.as_view(), name="api-v1-job-execution"),
    path("virtual-clusters", V1VirtualClustersView.as_view(), name="api-v1-virtual-clusters"),
    path(
        "virtual-clusters/<str:name>", V1VirtualClusterView.as_view(), name="api-v1-virtual-cluster"
    ),
]
