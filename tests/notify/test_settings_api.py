"""GET/PUT /api/v2/users/<name>/alerts and the /account/alerts/ page: the settings as the user
sees them (never the secret), and every bad input refused with a 400 that names its field."""

from __future__ import annotations

import pytest
from django.test import Client

from notify.models import AlertSettings
from tests.api.helpers import client_for
from tests.notify.conftest import SECRET

pytestmark = pytest.mark.django_db

URL = "/api/v2/users/me/alerts"


@pytest.fixture
def with_address(alice):
    alice.email = "alice@lab.example"
    alice.save()
    return alice


def test_a_user_sets_alerts_and_never_sees_the_secret_again(with_address, receiver):
    api = client_for(with_address)
    change = {
        "email": True,
        "webhookUrl": receiver.url,
        "webhookSecret": SECRET,
        "events": ["failed", "waiting"],
        "waitingMinutes": 90,
    }

    answer = api.put(URL, change, format="json")

    assert answer.status_code == 200, answer.content
    shown = api.get(URL).json()
    assert shown["email"] is True and shown["emailAddress"] == "alice@lab.example"
    assert shown["webhookUrl"] == receiver.url and shown["webhookSecretSet"] is True
    assert shown["events"] == ["failed", "waiting"] and shown["waitingMinutes"] == 90
    assert SECRET not in answer.content.decode() + api.get(URL).content.decode()
    web = Client()
    web.force_login(with_address)
    page = web.get("/account/alerts/")
    assert page.status_code == 200
    assert SECRET not in page.content.decode()
    assert 'id="secret-state">set<' in page.content.decode()
    row = AlertSettings.objects.get(user=with_address)
    assert row.webhook_secret == SECRET


def test_a_put_changes_only_the_fields_it_gives(with_address, receiver):
    api = client_for(with_address)
    api.put(URL, {"webhookUrl": receiver.url, "webhookSecret": SECRET}, format="json")

    api.put(URL, {"events": ["succeeded"]}, format="json")

    row = AlertSettings.objects.get(user=with_address)
    assert row.webhook_url == receiver.url and row.webhook_secret == SECRET
    assert row.events == ["succeeded"]


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"events": ["failed", "nope"]}, "events", "not a valid choice"),
        ({"events": ["alert"]}, "events", "is for admins"),
        ({"events": "failed"}, "events", "list"),
        ({"waitingMinutes": 0}, "waitingMinutes", "greater than or equal to 1"),
        ({"email": "perhaps"}, "email", "valid boolean"),
        ({"webhookUrl": "ftp://hooks.lab.example/x"}, "webhookUrl", "http:// or https://"),
        ({"webhookUrl": "https://u:p@hooks.lab.example/"}, "webhookUrl", "user or password"),
        ({"webhookUrl": "https://no-such-host.invalid/"}, "webhookUrl", "cannot be resolved"),
        ({"webhookUrl": "http://127.0.0.1:9/"}, "webhookUrl", "blocked network"),
        ({"webhookUrl": "https://192.0.2.10/hook"}, "webhookSecret", "required"),
        ({"event": ["failed"]}, "event", "unknown field"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(with_address, settings, change, field, words):
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    answer = client_for(with_address).put(URL, change, format="json")

    assert answer.status_code == 400, answer.content
    message = answer.json()["message"]
    assert message.startswith(field) and words in message, message
    assert not AlertSettings.objects.filter(user=with_address).exists()


def test_email_is_refused_without_an_address(alice):
    answer = client_for(alice).put(URL, {"email": True}, format="json")

    assert answer.status_code == 400
    assert answer.json()["message"] == "email: the account has no e-mail address to send to"


def test_email_is_refused_when_the_portal_sends_none(with_address, settings):
    settings.EMAIL_HOST = ""
    answer = client_for(with_address).put(URL, {"email": True}, format="json")

    assert answer.status_code == 400
    assert "EMAIL_HOST" in answer.json()["message"]


def test_an_admin_may_have_the_portals_alerts(admin):
    admin.email = "admin@lab.example"
    admin.save()
    answer = client_for(admin).put(URL, {"email": True, "events": ["alert"]}, format="json")

    assert answer.status_code == 200
    assert "alert" in answer.json()["availableEvents"]


def test_a_user_reaches_only_their_own_alerts_and_an_admin_anyones(alice, bob, admin):
    assert client_for(bob).get("/api/v2/users/alice/alerts").status_code == 403
    assert client_for(alice).get("/api/v2/users/alice/alerts").status_code == 200
    assert client_for(admin).get("/api/v2/users/alice/alerts").status_code == 200
    assert client_for(admin).get("/api/v2/users/nobody/alerts").status_code == 404
    assert client_for(None).get(URL).status_code == 401


def test_the_page_saves_the_form_and_refuses_bad_input_on_its_field(with_address, receiver):
    web = Client()
    web.force_login(with_address)
    form = {
        "address": "alice@lab.example",
        "email": "on",
        "webhook_url": receiver.url,
        "webhook_secret": SECRET,
        "events": ["failed", "preempted"],
        "waiting_minutes": "",
    }

    assert web.post("/account/alerts/", form).status_code == 302

    row = AlertSettings.objects.get(user=with_address)
    assert row.email and row.webhook_secret == SECRET and row.events == ["failed", "preempted"]
    kept = web.post("/account/alerts/", {**form, "webhook_secret": ""})  # empty: kept
    assert kept.status_code == 302
    assert AlertSettings.objects.get(user=with_address).webhook_secret == SECRET
    refused = web.post("/account/alerts/", {**form, "webhook_url": "http://169.254.169.254/"})
    assert refused.status_code == 400
    assert "blocked network" in refused.content.decode()


def test_the_nav_links_to_the_account_page_which_links_to_the_alerts(web):
    assert 'href="/account/">Account<' in web.get("/jobs/").content.decode()
    assert 'href="/account/alerts/">Alerts<' in web.get("/account/").content.decode()
