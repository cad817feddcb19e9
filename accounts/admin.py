from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.http import HttpRequest

from accounts.models import ApiToken
from accounts.removal import UserHasLiveJobs, live_job_count


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["user", "kind", "created_at", "expires_at"]
    readonly_fields = ["digest"]


User = get_user_model()
admin.site.unregister(User)


@admin.register(User)
class PortalUserAdmin(UserAdmin):
    """Django's user admin, except that a user with live jobs is not deleted (the page lists
    why, as it does for protected objects), single or in bulk."""

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[Any, ...]:
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        protected = list(protected)
        for user in objs:
            count = live_job_count(user)
            if count:
                protected.append(str(UserHasLiveJobs(user.get_username(), count)))
        if protected:  # refused anyway: say why (live jobs are not deletable in the admin)
            perms_needed = set()
        return deleted, counts, perms_needed, protected
