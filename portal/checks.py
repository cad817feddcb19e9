"""System checks for settings read from the environment: a bad value is reported with its id
by ``manage.py check`` (and before ``runserver``, ``migrate`` and ``runportal`` start) rather
than at the first request or pass that uses it."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import Error, register

# The backends clusters/registry.py builds.
CLUSTER_BACKENDS = ("local", "kubernetes")
REDIS_SCHEMES = ("redis", "rediss", "unix")
RATE = re.compile(r"^\d+/[smhd]\w*$")  # DRF reads the first letter of the period
# Numbers that have no lower bound in settings.py's readers and mean nothing below zero.
NOT_NEGATIVE = (
    "LOCAL_STOP_GRACE_SECONDS",
    "API_APPLICATION_TOKEN_SECONDS",
    "K8S_API_BACKOFF_SECONDS",
    "K8S_API_BACKOFF_CAP_SECONDS",
)


@register("portal")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    errors: list[Error] = []
    if settings.CLUSTER_BACKEND not in CLUSTER_BACKENDS:
        errors.append(
            Error(
                f"CLUSTER_BACKEND is {settings.CLUSTER_BACKEND!r}",
                hint=f"use one of: {', '.join(CLUSTER_BACKENDS)}",
                id="portal.E001",
            )
        )
    scheme = urlsplit(settings.REDIS_URL).scheme
    if scheme not in REDIS_SCHEMES:
        errors.append(
            Error(
                f"REDIS_URL has the scheme {scheme!r}",
                hint=f"use a URL of one of: {', '.join(s + '://' for s in REDIS_SCHEMES)}",
                id="portal.E002",
            )
        )
    for name in NOT_NEGATIVE:
        if getattr(settings, name) < 0:
            errors.append(
                Error(
                    f"{name} is {getattr(settings, name)}", hint="use 0 or more", id="portal.E003"
                )
            )
    for scope, rate in settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"].items():
        if rate is not None and not RATE.match(rate):
            errors.append(
                Error(
                    f"API_RATE_{scope.upper()} is {rate!r}",
                    hint="use <requests>/<second|minute|hour|day>, e.g. 1200/minute",
                    id="portal.E004",
                )
            )
    for item in settings.K8S_NODE_SELECTOR:
        key, sep, _ = item.partition("=")
        if not sep or not key.strip():
            errors.append(
                Error(
                    f"K8S_NODE_SELECTOR holds {item!r}",
                    hint="use key=value pairs separated by commas",
                    id="portal.E005",
                )
            )
    return errors
