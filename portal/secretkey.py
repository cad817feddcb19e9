from __future__ import annotations

import secrets
from pathlib import Path


def load_or_create_secret_key(path: Path) -> str:
    """The key stored at ``path``, made on first use (readable by the owner only)."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    path.touch(mode=0o600)
    path.write_text(key)
    return key
