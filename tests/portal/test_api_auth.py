"""Tokens, logout, info and rate limits of the API."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import ApiToken
from apikit import throttling
from apikit.throttling import UserRateThrottle
from tests.support.servers import free_port

pytestmark = pytest.mark.django_db


def login(username: str = "alice") -> str:
    response = APIClient().post(
        "/api/v2/authn/basic/login", {"username": username, "password": f"{username}-secret-pw"}
    )
    return response.json()["token"]


def bearer(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def test_logout_revokes_the_token(alice):
    client = bearer(login())
    assert client.get("/api/v2/tokens").status_code == 200
    assert client.delete("/api/v2/authn/basic/logout").status_code == 200
    assert client.get("/api/v2/tokens").status_code == 401


def test_tokens_are_listed_without_showing_them_whole(alice):
    token = login()
    listed = bearer(token).get("/api/v2/tokens").json()["tokens"]
    assert listed == [f"{token[:8]}…"]
    assert token not in str(listed)


def test_an_application_token_works_and_can_be_revoked(alice):
    client = bearer(login())
    app_token = client.post("/api/v2/tokens/application").json()["token"]
    assert bearer(app_token).get("/api/v2/jobs").status_code == 200
    assert client.delete(f"/api/v2/tokens/{app_token}").status_code == 200
    assert bearer(app_token).get("/api/v2/jobs").status_code == 401


def test_a_user_cannot_revoke_another_users_token(alice, bob):
    bobs = login("bob")
    assert bearer(login()).delete(f"/api/v2/tokens/{bobs}").status_code == 404
    assert bearer(bobs).get("/api/v2/jobs").status_code == 200


def test_a_token_names_its_own_user(alice, bob):
    assert bearer(login("bob")).get("/api/v2/users/me").json()["username"] == "bob"
    assert bearer(login()).get("/api/v2/users/me").json()["username"] == "alice"


def test_an_expired_token_is_refused_with_401(alice):
    token = login()
    ApiToken.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    response = bearer(token).get("/api/v2/jobs")
    assert response.status_code == 401
    assert response.json()["message"] == "Your token is invalid."  # OpenPAI's text


def test_the_token_of_a_deactivated_user_is_refused_with_401(alice):
    token = login()
    alice.is_active = False
    alice.save()
    assert bearer(token).get("/api/v2/jobs").status_code == 401


def test_info_and_authn_info_need_no_login(db):
    assert APIClient().get("/api/v2/info").json()["authnMethod"] == "basic"
    assert APIClient().get("/api/v1/authn/info").status_code == 200


def test_a_user_over_the_rate_limit_gets_429_with_retry_after(alice, monkeypatch):
    monkeypatch.setattr(UserRateThrottle, "THROTTLE_RATES", {"user": "3/minute"})
    monkeypatch.setattr(UserRateThrottle, "timer", lambda self: 615.0)
    client = bearer(login())
    codes = [client.get("/api/v2/jobs").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    response = client.get("/api/v2/jobs")
    assert int(response["Retry-After"]) == 60  # when the first of the three leaves the minute
    assert response.json()["code"] == "TooManyRequestsError"


def test_the_rate_limit_counts_per_window_and_opens_again_in_the_next(alice, monkeypatch):
    monkeypatch.setattr(UserRateThrottle, "THROTTLE_RATES", {"user": "2/minute"})
    now = [600.0]  # the start of a minute
    monkeypatch.setattr(UserRateThrottle, "timer", lambda self: now[0])
    client = bearer(login())
    assert [client.get("/api/v2/tokens").status_code for _ in range(3)] == [200, 200, 429]
    now[0] = 630.0
    response = client.get("/api/v2/tokens")
    assert response.status_code == 429 and int(response["Retry-After"]) == 30
    now[0] = 660.0  # the next minute
    assert client.get("/api/v2/tokens").status_code == 200


def test_the_rate_limit_lets_requests_through_and_says_so_once_while_its_cache_is_down(
    alice, settings, monkeypatch, caplog
):
    client = bearer(login())
    nothing_there = f"redis://127.0.0.1:{free_port()}/0"
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": nothing_there,
        }
    }
    monkeypatch.setattr(throttling._warn_unavailable, "next_at", 0.0)
    assert [client.get("/api/v2/tokens").status_code for _ in range(3)] == [200, 200, 200]
    warnings = [r for r in caplog.records if "rate limits are not enforced" in r.getMessage()]
    assert len(warnings) == 1
