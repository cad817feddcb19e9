"""Error pages keep the portal's layout and navigation; the browser's icon is there."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_a_missing_page_has_the_layout_and_navigation(web):
    response = web.get("/no/such/page/")
    assert response.status_code == 404
    body = response.content.decode()
    assert '<header class="top">' in body and 'href="/jobs/submit/"' in body
    assert "<code>/no/such/page/</code>" in body


def test_another_users_job_is_a_404_page_with_the_layout(web, bob):
    body = web.get("/jobs/bob~secret_job/").content.decode()
    assert "Not found" in body and "<nav>" in body


def test_a_missing_api_path_stays_json(web):
    response = web.get("/api/v2/no-such-thing")
    assert response.status_code == 404 and response.json()["code"] == "NoApiError"


def test_a_forbidden_page_has_the_layout(rf, alice):
    from django.core.exceptions import PermissionDenied
    from django.views.defaults import permission_denied

    request = rf.get("/somewhere/")
    request.user = alice
    body = permission_denied(request, PermissionDenied()).content.decode()
    assert "Not allowed" in body and "<code>/somewhere/</code>" in body
    assert 'href="/jobs/submit/"' in body


def test_the_server_error_page_has_the_layout(rf):
    from django.views.defaults import server_error

    response = server_error(rf.get("/"))
    assert response.status_code == 500
    body = response.content.decode()
    assert "Something went wrong" in body and '<header class="top">' in body


def test_the_favicon_is_served_to_anyone():
    response = Client().get("/favicon.ico")
    assert response.status_code == 200
    assert response["Content-Type"] == "image/x-icon"
    assert response.content[:4] == b"\x00\x00\x01\x00"  # an ICO file
    assert "max-age" in response["Cache-Control"]
