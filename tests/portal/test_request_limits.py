"""A request larger than the limit gets a 400 that names the limit, also when Django refuses it
before any view runs (the CSRF check reads the form first)."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

HUGE = "a" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)


def names_the_limits(text: str) -> bool:
    return all(
        needle in text
        for needle in (
            "JOB_MAX_BYTES",
            str(settings.JOB_MAX_BYTES),
            "DATA_UPLOAD_MAX_MEMORY_SIZE",
            str(settings.DATA_UPLOAD_MAX_MEMORY_SIZE),
        )
    )


def test_a_huge_form_to_the_submit_page_gets_a_page_that_names_the_limit(alice):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    browser.get("/jobs/submit/")  # sets the CSRF cookie, as a browser's first visit does
    token = browser.cookies["csrftoken"].value
    form = {"csrfmiddlewaretoken": token, "text": HUGE, "mode": "text"}
    response = browser.post("/jobs/submit/", form)
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
    body = response.content.decode()
    assert "Bad request" in body and names_the_limits(body)
    assert 'href="/jobs/submit/"' in body  # a way back


def test_a_huge_form_to_the_api_gets_json_that_names_the_limit(alice):
    client = APIClient(enforce_csrf_checks=True)
    response = client.post("/api/v2/authn/basic/login", {"username": "alice", "password": HUGE})
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "BadRequestError"
    assert names_the_limits(body["message"])


def test_a_huge_form_through_a_browser_session_to_the_api_gets_json_too(alice):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(alice)
    client.get("/jobs/submit/")
    token = client.cookies["csrftoken"].value
    response = client.post("/api/v2/tokens/application", {"x": HUGE}, HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 400
    assert names_the_limits(response.json()["message"])
