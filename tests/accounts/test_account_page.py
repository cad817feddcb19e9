"""``/account/``: a person's API tokens in the browser, as OpenPAI's portal offered them: make an
application token (its text shown once), see each by its prefix, revoke one."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from accounts.models import ApiToken

pytestmark = pytest.mark.django_db


def bearer(token: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")


def test_a_new_application_token_is_shown_once_and_works_for_a_script(web, alice):
    answer = web.post("/account/tokens/new/")
    assert answer.status_code == 200
    (token,) = re.findall(r'<code class="token">([^<]+)</code>', answer.content.decode())
    row = ApiToken.objects.get(user=alice)
    assert row.kind == "application" and row.prefix == token[:8]
    assert bearer(token).get("/api/v2/jobs").status_code == 200

    page = web.get("/account/").content.decode()
    assert token not in page  # from now on, only its prefix
    assert f"<code>{token[:8]}…</code>" in page and "application" in page
    assert "Account: kept by the portal." in page


def test_a_revoked_token_is_refused(web, alice):
    _, token = ApiToken.objects.issue(alice, 3600)
    row = ApiToken.objects.get(user=alice)
    answer = web.post(f"/account/tokens/{row.id}/revoke/", follow=True)
    assert "token revoked" in answer.content.decode()
    assert bearer(token).get("/api/v2/jobs").status_code == 401


def test_another_users_token_cannot_be_revoked(web, bob):
    _, token = ApiToken.objects.issue(bob, 3600)
    row = ApiToken.objects.get(user=bob)
    answer = web.post(f"/account/tokens/{row.id}/revoke/", follow=True)
    assert "no such token of yours" in answer.content.decode()
    assert bearer(token).get("/api/v2/jobs").status_code == 200
    assert f"{token[:8]}" not in web.get("/account/").content.decode()


def test_the_page_needs_a_sign_in_and_a_post_to_make_a_token(web):
    assert Client().get("/account/").status_code == 302
    assert Client().post("/account/tokens/new/").status_code == 302
    assert web.get("/account/tokens/new/").status_code == 405
    assert ApiToken.objects.count() == 0
