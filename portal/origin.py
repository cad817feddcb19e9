"""WebSockets only from the portal's own pages: the Origin must equal the portal's origin.

Channels' ``AllowedHostsOriginValidator`` accepts an Origin of any port of an allowed host, and
every job serves pages on ports of the portal's host: a job's page could open its owner's
terminal. Here the Origin's scheme, host and port must equal those the request came to (its
``Host`` header, itself one of ``ALLOWED_HOSTS``, and ``http``/``https`` for ``ws``/``wss``,
or the proxy's header when ``SECURE_PROXY_SSL_HEADER`` says to trust it), or be one of
``CSRF_TRUSTED_ORIGINS``. A socket without an Origin is refused: browsers always send one, and
other clients can send the portal's own.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import is_same_domain, split_domain_port, validate_host

DEFAULT_PORTS = {"http": 80, "https": 443}

Origin = tuple[str, str, int]


def parse_origin(value: str) -> Origin | None:
    """``(scheme, host, port)`` of an origin such as ``https://portal.example:8443``."""
    try:
        parts = urlsplit(value.strip().lower())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return parts.scheme, parts.hostname, port or DEFAULT_PORTS[parts.scheme]


def header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin1")
    return None


def request_scheme(scope: dict[str, Any]) -> str:
    """``https`` for a socket that came over TLS, to the portal or to a trusted proxy."""
    proxy_header = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy_header:
        meta_name, secure_value = proxy_header
        name = meta_name.removeprefix("HTTP_").replace("_", "-").lower().encode()
        forwarded = header(scope, name)
        if forwarded is not None:
            return "https" if forwarded.split(",")[0].strip() == secure_value else "http"
    return "https" if scope.get("scheme") in ("wss", "https") else "http"


def own_origin(scope: dict[str, Any]) -> Origin | None:
    """The portal's origin as this request names it, if its Host is an allowed one."""
    host = header(scope, b"host")
    if not host:
        return None
    domain, _ = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return None
    return parse_origin(f"{request_scheme(scope)}://{host}")


def trusted(origin: Origin, pattern: str) -> bool:
    """``pattern`` from ``CSRF_TRUSTED_ORIGINS``; ``https://*.example.com`` covers subdomains."""
    wildcard = "://*." in pattern
    allowed = parse_origin(pattern.replace("://*.", "://", 1))
    if allowed is None:
        return False
    scheme, host, port = allowed
    if wildcard:
        return origin[0] == scheme and origin[2] == port and is_same_domain(origin[1], "." + host)
    return origin == allowed


def origin_allowed(scope: dict[str, Any]) -> bool:
    value = header(scope, b"origin")
    origin = parse_origin(value) if value else None
    if origin is None:
        return False
    if origin == own_origin(scope):
        return True
    return any(trusted(origin, pattern) for pattern in settings.CSRF_TRUSTED_ORIGINS)


class SameOriginValidator:
    """ASGI middleware: the WebSocket goes on only from the portal's own origin."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] != "websocket":
            raise ValueError("SameOriginValidator guards WebSocket connections only")
        if origin_allowed(scope):
            return await self.application(scope, receive, send)
        return await WebsocketDenier()(scope, receive, send)
