from django.contrib import admin

from clusters.models import Storage, VirtualCluster


@admin.register(VirtualCluster)
class VirtualClusterAdmin(admin.ModelAdmin):
    list_display = ["name", "description", "created_at"]


@admin.register(Storage)
class StorageAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "path", "server", "claim_name", "open_to_all"]
    filter_horizontal = ["users", "groups"]
