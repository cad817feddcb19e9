from django.urls import path

from clusters.api.storages import KubernetesNodesView, StoragesView, StorageView
from clusters.api.vcs import (
    SkuTypesView,
    VirtualClusterStatusView,
    VirtualClusterUsageView,
)

urlpatterns = [
    path("cluster/sku-types", SkuTypesView.as_view(), name="api-sku-types"),
    path(
        "virtual-clusters/<str:name>/status",
        VirtualClusterStatusView.as_view(),
        name="api-virtual-cluster-status",
    ),
    path(
        "virtual-clusters/<str:name>/usage",
        VirtualClusterUsageView.as_view(),
        name="api-virtual-cluster-usage",
    ),
    path("storages", StoragesView.as_view(), name="api-storages"),
    path("storages/<str:name>", StorageView.as_view(), name="api-storage"),
    path("kubernetes/nodes", KubernetesNodesView.as_view(), name="api-k8s-nodes"),
]
