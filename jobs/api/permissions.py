"""Who may call the job list and a job's status without a token."""

from __future__ import annotations

from django.conf import settings
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView


class SignedInOrAnonymousStatus(BasePermission):
    """A signed-in caller, or with ``API_ANONYMOUS_JOB_STATUS`` an anonymous read: what that
    caller then sees is jobs.access.listable_jobs' (status summaries only)."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        if request.user and request.user.is_authenticated:
            return True
        return bool(settings.API_ANONYMOUS_JOB_STATUS) and request.method in SAFE_METHODS
