from django.urls import path

from clusters.views import manage

app_name = "clusters"

urlpatterns = [
    path("manage/virtual-clusters/new/", manage.vc_edit, name="manage-new"),
    path("manage/virtual-clusters/<str:name>/", manage.vc_edit, name="manage-edit"),
    path("manage/virtual-clusters/<str:name>/delete/", manage.vc_delete, name="manage-delete"),
    path("manage/users/", manage.users, name="manage-users"),
    path("manage/users/<str:username>/", manage.user_edit, name="manage-user"),
]
