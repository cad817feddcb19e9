"""The pages of the cluster and its virtual clusters as jobs use them (at the site's root)."""

from django.urls import path

from jobs.views import cluster, manage, vcs

app_name = "cluster"

urlpatterns = [
    path("cluster/", cluster.cluster, name="page"),
    path("virtual-clusters/", vcs.vc_list, name="vcs"),
    path("virtual-clusters/<str:name>/", vcs.vc_detail, name="vc"),
    path("manage/virtual-clusters/", manage.vc_list, name="manage-vcs"),
    path("manage/nodes/", manage.nodes, name="manage-nodes"),
]
