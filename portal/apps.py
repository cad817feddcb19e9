from __future__ import annotations

import secrets
from pathlib import Path

from django.apps import AppConfig
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from portal import checks


class PortalConfig(AppConfig):
    name = "portal"
    checks = checks  # registered when imported: the settings checks

    def ready(self) -> None:
        # What the embedded default keeps under var/, made here rather than when the settings
        # are read (importing them writes nothing).
        settings.STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise looks at start
        try:
            settings.SECRET_KEY  # noqa: B018 - Django refuses an empty one when it is read
        except ImproperlyConfigured:  # none in the environment: the embedded default's own
            settings.SECRET_KEY = stored_secret_key(settings.VAR_DIR / "secret_key")


def stored_secret_key(path: Path) -> str:
    """The key stored at ``path``, made on first use (readable by the owner only), so that
    sessions survive restarts."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    path.touch(mode=0o600)
    path.write_text(key)
    return key
