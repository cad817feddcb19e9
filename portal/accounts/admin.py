from django.contrib import admin

from portal.accounts.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["user", "kind", "created_at", "expires_at"]
    readonly_fields = ["digest"]
