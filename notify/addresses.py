"""Where a webhook may connect. A webhook URL is a user's word, and the worker that follows it
sits inside the portal's network: aimed at 127.0.0.1:6379, at the database or at a cloud's
metadata address (169.254.169.254), it would make the worker a user's tool against them. So
the URL's host is resolved once, every address it resolves to is checked against
``WEBHOOK_BLOCKED_NETWORKS`` (less ``WEBHOOK_ALLOWED_NETWORKS``) and against the hosts of the
portal's own database and Redis, and the connection goes to the address that was checked (no
second lookup an attacker's DNS could answer differently)."""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from functools import cache
from urllib.parse import SplitResult, urlsplit

from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class Refused(ValueError):
    """A webhook URL that may not be used; the message says why."""


@dataclass(frozen=True)
class Target:
    scheme: str  # http or https
    host: str  # as written in the URL: the Host header and the TLS server name
    port: int
    path: str  # with its query
    address: str  # the checked address to connect to


def parse(url: str) -> SplitResult:
    """The URL split, or ``Refused`` when it is not an http(s) URL a webhook may have."""
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - raises ValueError on a port that is not one
    except ValueError as exc:
        raise Refused(f"not a URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise Refused("must start with http:// or https://")
    if not parts.hostname:
        raise Refused("has no host")
    if parts.username is not None or parts.password is not None:
        raise Refused("may not hold a user or password (the signature says who sends it)")
    if parts.fragment:
        raise Refused("may not have a #fragment")
    return parts


def resolve(url: str) -> Target:
    """Where ``url`` connects: the first address its host resolves to, after every address
    was checked. ``Refused`` says why not."""
    parts = parse(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise Refused(f"its host {host} cannot be resolved ({exc})") from None
    addresses = list(dict.fromkeys(info[4][0] for info in found))
    if not addresses:
        raise Refused(f"its host {host} resolves to no address")
    for address in addresses:
        why = refusal(ipaddress.ip_address(address.split("%")[0]), port)
        if why:
            shown = host if host == address else f"{host} ({address})"
            raise Refused(f"{shown} is {why}; webhooks may not go there")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(parts.scheme, host, port, path, addresses[0])


def refusal(address: IPAddress, port: int) -> str | None:
    """Why a webhook may not connect to ``address:port``; None when it may."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    allowed = in_any(address, settings.WEBHOOK_ALLOWED_NETWORKS)
    if not allowed and in_any(address, settings.WEBHOOK_BLOCKED_NETWORKS):
        return "in a blocked network (WEBHOOK_BLOCKED_NETWORKS)"
    for what, host, service_port in services():
        if address in host_addresses(host):
            if port == service_port:
                return f"the portal's {what}"
            if not allowed:
                return f"the host of the portal's {what}"
    return None


def services() -> list[tuple[str, str, int]]:
    """The portal's database and Redis (broker, cache, channel layer): (what, host, port)."""
    found = []
    database = settings.DATABASES["default"]
    if database.get("HOST") and not str(database["HOST"]).startswith("/"):
        found.append(("database", str(database["HOST"]), int(database.get("PORT") or 5432)))
    for what, url in (("Redis", settings.REDIS_URL), ("broker", settings.CELERY_BROKER_URL)):
        parts = urlsplit(url or "")
        if parts.scheme in ("redis", "rediss") and parts.hostname:
            found.append((what, parts.hostname, parts.port or 6379))
    return found


def host_addresses(host: str) -> frozenset[IPAddress]:
    try:
        return frozenset({ipaddress.ip_address(host)})
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return frozenset()
    return frozenset(ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos)


def in_any(address: IPAddress, networks: list[str]) -> bool:
    return any(address in network for network in parsed(tuple(networks)))


@cache
def parsed(networks: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(n, strict=False) for n in networks)
