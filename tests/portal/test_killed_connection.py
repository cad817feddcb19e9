"""A database connection killed between two requests (a PostgreSQL restart, a failover, an
idle-session timeout) costs the web process nothing: the next request gets a new connection.
While the database refuses connections, a request gets a 503 that says so (``portal.unavailable``)
and, once it is back, requests are served again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import requests
from django.db import connection
from django.test import Client

from accounts.models import ApiToken
from tests.support.servers import ROOT, web_server
from tests.waiting import wait_for


def test_every_request_checks_its_reused_connection_before_using_it():
    code = (
        "import django, json; django.setup(); from django.conf import settings;"
        "print(json.dumps(settings.DATABASES['default']['CONN_HEALTH_CHECKS']))"
    )
    for url in (os.environ.get("DATABASE_URL", ""), "sqlite:////tmp/portal-health.sqlite3"):
        run = subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings", "DATABASE_URL": url},
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(run.stdout) is True


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="only PostgreSQL can end another's session"
)
@pytest.mark.django_db(transaction=True)
def test_a_connection_killed_between_requests_gives_no_500(alice, tmp_path: Path):
    token = ApiToken.objects.issue(alice, 3600)[1]
    app_name = f"portal-test-{uuid.uuid4().hex[:12]}"
    api = requests.Session()
    api.headers["Authorization"] = f"Bearer {token}"

    def server_sessions() -> list[int]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s", [app_name]
            )
            return [row[0] for row in cursor.fetchall()]

    # libpq names the server's sessions after PGAPPNAME: only they are killed, no one else's.
    with web_server(tmp_path / "server.log", PGAPPNAME=app_name) as base:
        for path in ("/api/v2/jobs", "/api/v2/users/me", "/api/v2/info"):
            assert api.get(base + path, timeout=30).status_code == 200
            pids = wait_for(server_sessions)
            with connection.cursor() as cursor:
                for pid in pids:
                    cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
            wait_for(lambda: not server_sessions())
            answer = api.get(base + path, timeout=30)
            assert answer.status_code == 200, answer.text[:300]


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="only PostgreSQL can refuse a database's sessions"
)
@pytest.mark.django_db(transaction=True)
def test_while_the_database_refuses_connections_requests_get_a_503_that_says_so(
    alice, tmp_path: Path
):
    token = ApiToken.objects.issue(alice, 3600)[1]
    app_name = f"portal-test-{uuid.uuid4().hex[:12]}"
    api = requests.Session()
    api.headers["Authorization"] = f"Bearer {token}"
    name = connection.settings_dict["NAME"]
    client = Client()
    client.force_login(alice)
    browser = requests.Session()  # alice's session, as her browser holds it
    browser.cookies.set("sessionid", client.cookies["sessionid"].value)

    def refuse(refused: bool) -> None:
        with connection._nodb_cursor() as cursor:  # not from the database itself
            allow = "false" if refused else "true"
            cursor.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {allow}')
            if refused:  # the server's sessions end; the test's own stays
                cursor.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE application_name = %s",
                    [app_name],
                )

    with web_server(tmp_path / "server.log", PGAPPNAME=app_name) as base:
        assert api.get(base + "/api/v2/jobs", timeout=30).status_code == 200
        refuse(True)
        try:
            text = json.dumps({"jobName": "refused", "taskRoles": {}})
            answer = api.post(base + "/api/v2/jobs", data=text, timeout=60)
            assert answer.status_code == 503, answer.text[:300]
            assert answer.json()["code"] == "ServiceUnavailable"
            assert "database did not answer" in answer.json()["message"]
            assert answer.headers["Retry-After"] == "5"
            page = browser.get(base + "/jobs/", timeout=60, allow_redirects=False)
            assert page.status_code == 503, page.text[:300]
            assert "Service unavailable" in page.text and "database did not answer" in page.text
        finally:
            refuse(False)
        # The database back: served again once the pool's next try to connect comes (it backs
        # off, 1 s, 2 s, 4 s... while the database refuses: psycopg_pool's own schedule).
        wait_for(lambda: api.get(base + "/api/v2/jobs", timeout=30).status_code == 200, 120)
    assert "Traceback" not in (tmp_path / "server.log").read_text()
