from django.urls import path

from clusters.api.v1 import V1VirtualClustersView, V1VirtualClusterView

urlpatterns = [
    path("virtual-clusters", V1VirtualClustersView.as_view(), name="api-v1-virtual-clusters"),
    path(
        "virtual-clusters/<str:name>", V1VirtualClusterView.as_view(), name="api-v1-virtual-cluster"
    ),
]
