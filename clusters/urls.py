from django.urls import path

from clusters.views import cluster, manage, pages

app_name = "clusters"

urlpatterns = [
    path("cluster/", cluster.cluster, name="cluster"),
    path("virtual-clusters/", pages.vc_list, name="list"),
    path("virtual-clusters/<str:name>/", pages.vc_detail, name="detail"),
    path("manage/virtual-clusters/", manage.vc_list, name="manage-list"),
    path("manage/virtual-clusters/new/", manage.vc_edit, name="manage-new"),
    path("manage/virtual-clusters/<str:name>/", manage.vc_edit, name="manage-edit"),
    path("manage/virtual-clusters/<str:name>/delete/", manage.vc_delete, name="manage-delete"),
    path("manage/users/", manage.users, name="manage-users"),
    path("manage/users/<str:username>/", manage.user_edit, name="manage-user"),
    path("manage/nodes/", manage.nodes, name="manage-nodes"),
]
