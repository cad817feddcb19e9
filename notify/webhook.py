"""A webhook: the alert's JSON POSTed to the user's URL, signed as GitHub signs its own
(``X-Hub-Signature-256: sha256=<HMAC-SHA256 of the body with the user's secret, hex>``), with
the event's name and a delivery id that stays the same on every try (a receiver may drop a
delivery id it has seen). Connected to the address ``addresses.resolve`` checked, with short
timeouts; a redirect is an answer like any other that is not 2xx: not followed."""

from __future__ import annotations

import hashlib
import hmac
import http.client
import socket
import ssl

from django.conf import settings

from notify.addresses import Refused, Target, resolve

USER_AGENT = "gpu-portal-webhook/1"
MAX_ANSWER_BYTES = 64 * 1024


class WebhookError(Exception):
    """A try that did not deliver; ``permanent``: no later try would (the URL is refused)."""

    def __init__(self, message: str, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def headers(secret: str, body: bytes, event: str, delivery_id: str) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Portal-Event": event,
        "X-Portal-Delivery": delivery_id,
        "X-Hub-Signature-256": signature(secret, body),
    }


class PinnedHTTPConnection(http.client.HTTPConnection):
    """HTTP to the checked address, with the URL's host in the Host header."""

    def __init__(self, target: Target, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout)
        self.address = target.address

    def connect(self) -> None:
        self.sock = socket.create_connection((self.address, self.port), self.timeout)


class PinnedHTTPSConnection(http.client.HTTPSConnection):
    """HTTPS to the checked address; the certificate is checked against the URL's host."""

    def __init__(self, target: Target, timeout: float) -> None:
        self.tls = ssl.create_default_context()
        super().__init__(target.host, target.port, timeout=timeout, context=self.tls)
        self.address = target.address

    def connect(self) -> None:
        raw = socket.create_connection((self.address, self.port), self.timeout)
        self.sock = self.tls.wrap_socket(raw, server_hostname=self.host)


def post(url: str, secret: str, body: bytes, event: str, delivery_id: str) -> str:
    """POST the alert; the address it went to. ``WebhookError`` when it was not taken."""
    try:
        target = resolve(url)
    except Refused as exc:
        raise WebhookError(f"webhook URL refused: {exc}", permanent=True) from None
    timeout = settings.WEBHOOK_TIMEOUT_SECONDS
    kind = PinnedHTTPSConnection if target.scheme == "https" else PinnedHTTPConnection
    connection = kind(target, timeout)
    try:
        connection.request(
            "POST", target.path, body=body, headers=headers(secret, body, event, delivery_id)
        )
        answer = connection.getresponse()
        answer.read(MAX_ANSWER_BYTES)
    except (OSError, http.client.HTTPException) as exc:
        raise WebhookError(f"{target.host}:{target.port}: {exc or type(exc).__name__}") from None
    finally:
        connection.close()
    if not 200 <= answer.status < 300:
        raise WebhookError(f"{target.host}:{target.port} answered HTTP {answer.status}")
    return f"{target.address}:{target.port}"
