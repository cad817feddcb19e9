"""Create the first admin, ``admin``, when no admin exists yet.

Its password is PORTAL_ADMIN_PASSWORD when set, otherwise a random one printed once.
"""

from __future__ import annotations

import os
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the first admin account when there is none."

    def handle(self, *args: Any, **options: Any) -> None:
        users = get_user_model()
        if users.objects.filter(is_superuser=True).exists():
            self.stdout.write("An admin account exists already.")
            return
        password = os.environ.get("PORTAL_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
        users.objects.create_superuser("admin", email="", password=password)
        if os.environ.get("PORTAL_ADMIN_PASSWORD"):
            self.stdout.write(
                "Created the admin account 'admin' (password from PORTAL_ADMIN_PASSWORD)."
            )
        else:
            self.stdout.write(
                f"Created the admin account 'admin' with password: {password}\n"
                "  (shown once: write it down, or change it in the admin pages)"
            )
