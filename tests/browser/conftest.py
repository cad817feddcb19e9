"""A real portal for the browser: daphne in a subprocess on the test database, reconcile passes
in a thread of the test process, Debian's Chromium driven by Playwright."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings as django_settings

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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def database_url() -> str:
    db = django_settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def portal_url(transactional_db, settings, backend) -> Iterator[str]:
    port = free_port()
    env = {
        **os.environ,
        # The server's channel layer is this test's (tests/conftest.py), so that news sent by
        # the reconcile passes here reaches the pages it serves.
        "CHANNEL_LAYER_PREFIX": settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"],
        "DATABASE_URL": database_url(),
        "CELERY_TASK_ALWAYS_EAGER": "True",
        "LOCAL_TASK_ROOT": str(settings.LOCAL_TASK_ROOT),
        "LOCAL_STOP_GRACE_SECONDS": "2",
        "SECRET_KEY": "browser-tests",
    }
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "portal.asgi:application",
        ],
        env=env,
        cwd=Path(__file__).resolve().parents[2],
    )
    stop = threading.Event()
    loop = threading.Thread(target=reconcile_loop, args=(backend, stop), daemon=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the portal did not start") from None
                time.sleep(0.2)
        loop.start()
        yield f"http://127.0.0.1:{port}"
    finally:
        stop.set()
        if loop.is_alive():
            loop.join(10)
        server.terminate()
        server.wait(10)


def reconcile_loop(backend, stop: threading.Event) -> None:
    """What beat does in production: a pass every few tenths of a second."""
    from django.db import connection

    from jobs.reconcile import reconcile

    try:
        while not stop.is_set():
            reconcile(backend)
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
