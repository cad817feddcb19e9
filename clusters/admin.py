from django.contrib import admin

from clusters.models import VirtualCluster


@admin.register(VirtualCluster)
class VirtualClusterAdmin(admin.ModelAdmin):
    list_display = ["name", "description", "created_at"]
