from django.contrib import admin

from jobs.models import Job, JobAttempt, JobEvent, Task


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "state", "virtual_cluster", "created_at"]
    list_filter = ["state", "virtual_cluster"]
    search_fields = ["name", "owner__username"]
    # The protocol and the submitted text may hold secrets in clear, the private key is the
    # owner's alone: never shown, not even to a superuser.
    exclude = ["protocol", "submitted_text", "ssh_private_key"]
    readonly_fields = ["owner", "state", "reason", "exit_code", "retries"]


@admin.register(JobAttempt)
class JobAttemptAdmin(admin.ModelAdmin):
    list_display = ["job", "number", "state", "created_at"]


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ["attempt", "role", "index", "state", "ip", "exit_code", "retries"]
    list_filter = ["state"]


@admin.register(JobEvent)
class JobEventAdmin(admin.ModelAdmin):
    list_display = ["job", "kind", "message", "created_at"]
