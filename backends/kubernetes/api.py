"""Calling the Kubernetes API server: the client, and retries for what is worth retrying.

429 (too many requests), 5xx and broken connections are retried with exponential backoff and full
jitter, a bounded number of times; then ``KubernetesUnavailable`` is raised, which the reconcile
pass treats like any failed pass (nothing about a job changes; the next pass tries again). Other
answers (404, 409, 422, ...) are the caller's business and raise ``ApiException`` at once.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from backends.base import BackendUnavailable

log = logging.getLogger(__name__)
T = TypeVar("T")
JSON = "application/json"


class KubernetesUnavailable(BackendUnavailable):
    """The API server kept answering 429/5xx, or could not be reached, after every retry."""


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 6  # calls in all, the first one included
    base_seconds: float = 0.2
    cap_seconds: float = 5.0
    sleep: Callable[[float], None] = time.sleep

    def delay(self, failures: int, retry_after: float | None = None) -> float:
        """Full jitter: uniform in [0, min(cap, base * 2**failures)]; Retry-After when given."""
        if retry_after is not None:
            return min(self.cap_seconds, max(0.0, retry_after))
        return random.uniform(0, min(self.cap_seconds, self.base_seconds * 2**failures))


def retryable(exc: BaseException) -> bool:
    if isinstance(exc, ApiException):
        return exc.status in (0, None, 429) or int(exc.status) >= 500
    return isinstance(exc, urllib3.exceptions.HTTPError | ConnectionError | TimeoutError)


def retry_after(exc: BaseException) -> float | None:
    headers = getattr(exc, "headers", None) or {}
    try:
        return float(headers.get("Retry-After", ""))
    except (TypeError, ValueError):
        return None


def call(policy: RetryPolicy, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, retried on 429, 5xx and broken connections."""
    for failures in range(policy.attempts):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            if not retryable(exc):
                raise
            if failures + 1 >= policy.attempts:
                raise KubernetesUnavailable(f"{what}: {describe(exc)}") from exc
            delay = policy.delay(failures, retry_after(exc))
            log.warning("%s: %s; retrying in %.2fs", what, describe(exc), delay)
            policy.sleep(delay)
    raise AssertionError("unreachable")


def describe(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        return f"HTTP {exc.status} {exc.reason or ''}".strip()
    return f"{type(exc).__name__}: {exc}"


def server_message(exc: BaseException) -> str:
    """What the API server said about a refusal: the ``message`` of its Status body (for an
    ``ApiException``, or a WebSocket upgrade the server answered with an error, whose body the
    client folds into the exception's text); ``describe(exc)`` when it said nothing readable."""
    text = getattr(exc, "body", None) or ""
    if not text and isinstance(exc, ApiException) and exc.reason and " -+-+- " in exc.reason:
        text = exc.reason.rsplit(" -+-+- ", 1)[1]  # "Handshake status 400 ... -+-+- <body>"
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    try:
        status = orjson.loads(text)
    except orjson.JSONDecodeError:
        return text.strip() if text.strip() and text.strip() != "None" else describe(exc)
    if isinstance(status, dict) and status.get("message"):
        return str(status["message"])
    return describe(exc)


def body(response: Any) -> Any:
    """The decoded JSON of a raw (``_preload_content=False``) response (orjson: a list of
    10,000 pods decodes in about a third of the time ``json`` takes)."""
    return orjson.loads(response.data or b"null")


def make_api_client(
    in_cluster: bool = False, kubeconfig: str = "", context: str = ""
) -> client.ApiClient:
    """A client for the cluster the portal runs in, or the one a kubeconfig names."""
    configuration = client.Configuration()
    if in_cluster:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    else:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig or None,
            context=context or None,
            client_configuration=configuration,
        )
    return api_client_for(configuration)


def api_client_for(configuration: client.Configuration) -> client.ApiClient:
    """An ``ApiClient`` whose transport does not retry by itself (``call`` does, bounded)."""
    configuration.retries = False
    return client.ApiClient(configuration)
