"""The ``/api/v1/token`` and ``/api/v1/user/<user>`` paths OpenPAI's Python SDK (openpaisdk)
calls, as the v2 operations."""

from __future__ import annotations

from accounts.api.auth import LoginView
from accounts.api.users import UserView


class V1TokenView(LoginView):
    """``POST /api/v1/token`` ``{username, password, expiration}``: as basic login."""


class V1UserView(UserView):
    """``GET /api/v1/user/<user>``: as ``/api/v2/users/<user>``."""

    http_method_names = ["get", "head", "options"]
