"""A real portal for the browser: uvicorn in a subprocess on the test database, reconcile passes
in a thread of the test process, Debian's Chromium driven by Playwright."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from tests.support.servers import web_server

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def portal_url(transactional_db, settings, backend) -> Iterator[str]:
    stop = threading.Event()
    loop = threading.Thread(target=reconcile_loop, args=(backend, stop), daemon=True)
    # The server's channel layer is this test's (tests/conftest.py), so that news sent by the
    # reconcile passes here reaches the pages it serves.
    with web_server(
        CHANNEL_LAYER_PREFIX=settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"],
        CELERY_TASK_ALWAYS_EAGER="True",
        LOCAL_STOP_GRACE_SECONDS="2",
    ) as url:
        loop.start()
        try:
            yield url
        finally:
            stop.set()
            loop.join(10)


def reconcile_loop(backend, stop: threading.Event) -> None:
    """What beat does in production, more often: a full pass every few tenths of a second."""
    from django.db import connection

    from jobs.lifecycle.passes import reconcile

    try:
        while not stop.is_set():
            reconcile(backend, full=True)
            stop.wait(0.3)
    finally:
        connection.close()


@pytest.fixture
def browser_page(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop in this thread; the test's own ORM calls are
    # still plain synchronous ones (Django's documented switch for this case).
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.set_default_timeout(30_000)
        yield page
        browser.close()
