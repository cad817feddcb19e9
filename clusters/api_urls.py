from django.urls import path

from clusters.api import VirtualClustersView, VirtualClusterView

urlpatterns = [
    path("virtual-clusters", VirtualClustersView.as_view(), name="api-virtual-clusters"),
    path("virtual-clusters/<str:name>", VirtualClusterView.as_view(), name="api-virtual-cluster"),
]
