"""The API documentation page loads nothing from another host (air-gapped clusters)."""

from __future__ import annotations

import re

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_the_api_docs_page_names_no_other_host():
    body = Client().get("/api/docs/").content.decode()
    assert "Redoc.init" in body or "<redoc" in body
    assert not re.search(r"(src|href)=[\"']?(https?:)?//", body), "an asset from another host"
    assert "https://" not in body


def test_redoc_is_served_by_the_portal():
    body = Client().get("/api/docs/").content.decode()
    script = re.search(r'<script src="([^"]+redoc[^"]*)"', body)
    assert script and script.group(1).startswith("/static/")
    response = Client().get(script.group(1))
    assert response.status_code == 200
    assert b"Redoc" in b"".join(response.streaming_content)


def test_the_api_docs_page_keeps_the_browser_on_this_host():
    policy = Client().get("/api/docs/")["Content-Security-Policy"]
    assert "default-src 'self'" in policy and "img-src 'self' data:" in policy
    assert "http" not in policy
