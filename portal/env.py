"""Typed readers for settings that come from the environment.

Each refuses a value it cannot read instead of guessing, so bad configuration fails at start-up
with the variable's name in the message.
"""

from __future__ import annotations

import os
from pathlib import Path


class ConfigError(ValueError):
    pass


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_int(name: str, default: int, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {value}")
    return value


def env_float(name: str, default: float, minimum: float = 0.0) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from None
    if value < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {value}")
    return value


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    if raw in ("True", "true", "1"):
        return True
    if raw in ("False", "false", "0"):
        return False
    raise ConfigError(f"{name} must be True or False, got {raw!r}")


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_pairs(name: str) -> dict[str, str]:
    """``NAME=a=1,b=2`` as ``{"a": "1", "b": "2"}`` (spaces around each part dropped); a pair
    without ``=`` or without a key is refused, naming the setting."""
    pairs = {}
    for item in env_list(name, []):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{name}: expected key=value, got {item!r}")
        pairs[key.strip()] = value.strip()
    return pairs


def env_secret(name: str, default: str) -> str:
    """A secret from ``NAME``, or from the file named by ``NAME_FILE``."""
    file_name = os.environ.get(f"{name}_FILE")
    if file_name:
        try:
            return Path(file_name).read_text().strip()
        except OSError as exc:
            raise ConfigError(f"{name}_FILE: cannot read {file_name}: {exc.strerror}") from None
    return os.environ.get(name, default)


def env_port_range(name: str) -> range | None:
    """``FIRST-LAST`` (inclusive, TCP ports), or None when unset or empty."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    first, sep, last = raw.partition("-")
    if not (sep and first.strip().isdigit() and last.strip().isdigit()):
        raise ConfigError(f"{name} must be FIRST-LAST (ports), got {raw!r}")
    low, high = int(first), int(last)
    if not 0 < low <= high < 65536:
        raise ConfigError(f"{name}: {low}-{high} is not a range of TCP ports")
    return range(low, high + 1)
