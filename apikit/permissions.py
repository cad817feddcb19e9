"""What an application token may not do: OpenPAI's ``checkNotApplication`` (its rest-server
``src/middlewares/token.js``), with its 403 ``ForbiddenUserError`` and text."""

from __future__ import annotations

from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

# OpenPAI's text: its SDKs compare it, not only the code.
APPLICATIONS_NOT_ALLOWED = "Applications are not allowed to do this operation."


def is_application(request: Request) -> bool:
    """Whether the call carries an application token (``POST /api/v2/tokens/application``)."""
    # request.auth is the ApiToken that authenticated the call (accounts.authentication), or
    # None for a session: read by its kind, so that every app's API may ask without importing
    # the accounts app.
    return getattr(request.auth, "kind", None) == "application"


class NoApplicationWrites(BasePermission):
    """OpenPAI's ``checkNotApplication`` on every change of users and groups (its routes
    v2/user.js and v2/group.js): an application token reads them, a person's token changes
    them. A 403 ``ForbiddenUserError`` with OpenPAI's text, before any admin check, as there."""

    message = APPLICATIONS_NOT_ALLOWED

    def has_permission(self, request: Request, view: APIView) -> bool:
        return request.method in SAFE_METHODS or not is_application(request)


class NoApplications(BasePermission):
    """OpenPAI's ``checkNotApplication`` on all of ``/tokens`` (its routes/token.js): an
    application token neither lists, creates nor revokes tokens."""

    message = APPLICATIONS_NOT_ALLOWED

    def has_permission(self, request: Request, view: APIView) -> bool:
        return not is_application(request)
