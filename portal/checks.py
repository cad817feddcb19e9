"""System checks for settings read from the environment: a bad value is reported with its id
by ``manage.py check`` (and before ``runserver``, ``migrate`` and ``runportal`` start) rather
than at the first request or pass that uses it; and the local backend is not started beside a
Redis or database its tasks could use without a password."""

from __future__ import annotations

import ipaddress
import re
import shutil
import socket
from typing import Any
from urllib.parse import urlsplit

import redis
from django.conf import settings
from django.core.checks import Error, register

from backends.local import firewall
from clusters.registry import local_firewall

# The backends clusters/registry.py builds.
CLUSTER_BACKENDS = ("local", "kubernetes", "slurm")
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
    return errors


SLURM_COMMANDS = ("sbatch", "squeue", "scancel", "srun", "sinfo", "scontrol")


@register("portal")
def check_slurm_client(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """On the Slurm backend this machine is a submit host: without Slurm's client commands
    every pass would fail, and every job wait, with no word on the pages."""
    if settings.CLUSTER_BACKEND != "slurm":
        return []
    missing = [command for command in SLURM_COMMANDS if shutil.which(command) is None]
    if not missing:
        return []
    return [
        Error(
            f"CLUSTER_BACKEND is slurm and this machine lacks Slurm's {', '.join(missing)}",
            hint="make it a submit host of the cluster: install its client commands "
            "(Debian: slurm-client), its slurm.conf (SLURM_CONF) and its munge key",
            id="portal.E008",
        )
    ]


@register("portal")
def check_open_services(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """The local backend's tasks share this host's network: a Redis or database of the portal's
    that wants no password must be out of their reach (the task firewall, as root, keeps them
    from every port of this host), or the portal refuses to start."""
    if settings.CLUSTER_BACKEND != "local" or settings.LOCAL_ALLOW_OPEN_SERVICES:
        return []
    unfenced = firewall_reason()  # None: tasks reach no port of this host but the allowed
    database = settings.DATABASES["default"]
    errors = (open_redis(unfenced), open_database(unfenced, database))
    return [e for e in errors if e is not None]


def open_redis(unfenced: str | None) -> Error | None:
    """REDIS_URL without a password, answering, and in tasks' reach."""
    url = urlsplit(settings.REDIS_URL)
    if url.scheme not in ("redis", "rediss") or url.password:
        return None  # a socket (not in the sandbox) or a password
    host = url.hostname or "localhost"
    if (unfenced is None and on_this_host(host)) or not redis_answers(settings.REDIS_URL):
        return None
    return Error(
        f"local tasks could use the portal's Redis (REDIS_URL, {host}:{url.port or 6379}) "
        f"without a password: its broker and its reconcile lock; {why_in_reach(host, unfenced)}",
        hint="give it a password (requirepass; redis://:<password>@host:port/0 in REDIS_URL), "
        f"or unset REDIS_URL for `make run`'s own Redis, which has one; {OPEN_ON_PURPOSE}",
        id="portal.E006",
    )


def open_database(unfenced: str | None, database: dict[str, Any]) -> Error | None:
    """A PostgreSQL or MySQL the portal reaches over TCP without a password, in tasks' reach
    (its local socket is hidden in the sandbox)."""
    host = str(database.get("HOST") or "")
    if database["ENGINE"].rsplit(".", 1)[-1] not in ("postgresql", "mysql"):
        return None
    if not host or host.startswith("/") or database.get("PASSWORD"):
        return None
    if unfenced is None and on_this_host(host):
        return None
    return Error(
        f"local tasks could use the portal's database (DATABASE_URL, {host}:"
        f"{database.get('PORT') or 'its port'}) as the portal does, without a password; "
        f"{why_in_reach(host, unfenced)}",
        hint="give its user a password (in DATABASE_URL) and take out the server's trust "
        f"lines; {OPEN_ON_PURPOSE}",
        id="portal.E007",
    )


OPEN_ON_PURPOSE = (
    "on this host, run the portal as root with nft (LOCAL_FIREWALL=auto: tasks reach no port of "
    "it but their jobs'); or set LOCAL_ALLOW_OPEN_SERVICES=true to allow it on purpose"
)


def firewall_reason() -> str | None:
    """Why local tasks are not fenced off this host's ports, or None when they are."""
    if not settings.LOCAL_SANDBOX:
        return "LOCAL_SANDBOX is off (tasks run as the portal's own user)"
    return firewall.unavailable_reason(local_firewall())


def why_in_reach(host: str, unfenced: str | None) -> str:
    if unfenced is None:
        return f"{host} is another host, which tasks reach as this one does"
    return f"the task firewall is not set: {unfenced}"


def on_this_host(host: str) -> bool:
    """Whether ``host`` is this machine: a loopback address, or one it can bind (its own)."""
    try:
        addresses = socket.getaddrinfo(host, None, type=socket.SOCK_DGRAM)
    except OSError:
        return False
    for family, _, _, _, address in addresses:
        ip = ipaddress.ip_address(str(address[0]).split("%")[0])
        if ip.is_loopback or ip.is_unspecified:
            return True
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            try:
                probe.bind((address[0], 0))
            except OSError:
                continue
            return True
    return False


def redis_answers(url: str) -> bool:
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
        return bool(client.ping())
    except (redis.exceptions.RedisError, OSError, ValueError):
        return False
