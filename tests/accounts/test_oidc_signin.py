"""Single sign-on against a real OpenID Connect provider (panva's oidc-provider, started by the
test: tests/support/oidc_provider.py): the portal's pages driven by Django's test client, the
provider's by requests, as a browser would follow their redirects. Claims mapped to a user,
groups re-mapped at each sign-in, refusals on the login page, sign-out at both ends, a token
made with the session, and what ``authn/info`` tells OpenPAI's clients."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import requests
from django.contrib.auth.models import Group, User
from django.test import Client
from rest_framework.test import APIClient

from accounts import oidc
from accounts.models import Account
from clusters.models import VirtualCluster
from tests.conftest import make_user
from tests.support.oidc_provider import ACCOUNTS, GROUPS_SCOPES, OidcProvider, oidc_provider
from tests.support.servers import free_port

pytestmark = pytest.mark.django_db

PORTAL = "http://testserver"
CALLBACK = f"{PORTAL}/oidc/callback/"
LOGIN_PAGE = f"{PORTAL}/login/"
OTHER_APP = {
    "client_id": "other-app",
    "client_secret": "other-app-secret-0123456789abcdef",
    "redirect_uris": ["http://other.example/callback"],
}


def point_at(settings, provider: OidcProvider | None, issuer: str = "") -> None:  # type: ignore[no-untyped-def]
    """The settings of README's worked example, on ``provider`` (or only ``issuer``)."""
    oidc._cache.clear()
    settings.OIDC_ISSUER = provider.issuer if provider else issuer
    settings.OIDC_RP_CLIENT_ID = provider.client_id if provider else "gpu-portal"
    settings.OIDC_RP_CLIENT_SECRET = provider.client_secret if provider else "a-secret"
    settings.OIDC_ENABLED = True
    settings.OIDC_RP_SCOPES = GROUPS_SCOPES
    settings.OIDC_PROVIDER_NAME = "Lab IdP"
    settings.OIDC_CREATE_USER = True
    settings.DIRECTORY_GROUPS = {"research": "research", "ml": "ml-staff"}
    settings.DIRECTORY_ADMIN_GROUPS = ["portal-admins"]
    settings.LOCAL_ACCOUNTS = True
    settings.AUTHENTICATION_BACKENDS = [
        "accounts.oidc.OIDCBackend",
        "accounts.ldap_backend.LocalAccountBackend",
    ]


@pytest.fixture
def provider(tmp_path: Path, settings) -> Iterator[OidcProvider]:  # type: ignore[no-untyped-def]
    with oidc_provider(
        tmp_path / "idp",
        redirect_uris=[CALLBACK],
        post_logout_redirect_uris=[LOGIN_PAGE],
        extra_clients=[OTHER_APP],
    ) as started:
        point_at(settings, started)
        yield started
    oidc._cache.clear()


@pytest.fixture
def research_vc(db) -> VirtualCluster:  # type: ignore[no-untyped-def]
    vc = VirtualCluster.objects.create(name="research")
    vc.groups.add(Group.objects.get_or_create(name="research")[0])
    return vc


def sign_in(
    client: Client,
    provider: OidcProvider,
    login: str,
    password: str,
    browser: requests.Session | None = None,
) -> Any:
    """ "Sign in with Lab IdP" on the login page, the provider's sign-in, and back: the
    portal's answer to the provider's redirect."""
    start = client.get("/oidc/authenticate/")
    assert start.status_code == 302, start.content
    back = provider.sign_in(browser or requests.Session(), start["Location"], login, password)
    assert back.startswith(CALLBACK + "?"), back
    return client.get(back.removeprefix(PORTAL))


def signed_in(client: Client) -> bool:
    return client.get("/jobs/").status_code == 200


def refusal_shown(client: Client, response: Any) -> str:
    """The login page the refused sign-in lands on, as text."""
    assert response.status_code == 302 and response["Location"] == "/login/", response
    return client.get("/login/").content.decode()


def with_groups(login: str, groups: list[str]) -> dict[str, dict[str, Any]]:
    accounts = {name: {**a, "claims": dict(a["claims"])} for name, a in ACCOUNTS.items()}
    accounts[login]["claims"]["groups"] = groups
    return accounts


def test_a_sign_in_makes_the_user_from_the_claims_and_remaps_groups_at_the_next(
    provider, research_vc
):
    here_only = Group.objects.create(name="given-here")
    client = Client()
    response = sign_in(client, provider, "alice-sso", "alice-idp-pw")
    assert response.status_code == 302 and response["Location"] == "/jobs/"
    assert signed_in(client)
    alice = User.objects.get(username="alice-sso")
    assert alice.email == "alice@lab.example"
    assert not alice.has_usable_password()  # the provider's password is never the portal's
    assert not alice.is_staff
    assert alice.account.source == Account.OIDC
    assert set(alice.groups.values_list("name", flat=True)) == {"research", "ml-staff"}
    assert research_vc.usable_by(alice)
    alice.groups.add(here_only)  # an admin's grant here: not the provider's to take away

    # At the provider, alice leaves research; her next sign-in says so.
    provider.set_accounts(with_groups("alice-sso", ["ml"]))
    again = Client()
    assert sign_in(again, provider, "alice-sso", "alice-idp-pw")["Location"] == "/jobs/"
    alice = User.objects.get(username="alice-sso")
    assert set(alice.groups.values_list("name", flat=True)) == {"ml-staff", "given-here"}
    assert not research_vc.usable_by(alice)
    assert User.objects.filter(username="alice-sso").count() == 1


def test_the_admin_group_makes_an_admin_and_leaving_it_unmakes_one(provider):
    sign_in(Client(), provider, "boss-sso", "boss-idp-pw")
    assert User.objects.get(username="boss-sso").is_staff
    provider.set_accounts(with_groups("boss-sso", []))
    sign_in(Client(), provider, "boss-sso", "boss-idp-pw")
    boss = User.objects.get(username="boss-sso")
    assert not boss.is_staff and not boss.is_superuser


def test_a_missing_username_claim_is_refused_on_the_login_page(provider):
    provider.set_accounts(
        {"nameless": {"password": "nameless-pw", "claims": {"email": "n@lab.example"}}}
    )
    client = Client()
    page = refusal_shown(client, sign_in(client, provider, "nameless", "nameless-pw"))
    assert "Lab IdP did not send the &#x27;preferred_username&#x27; claim" in page
    assert 'class="flash error"' in page
    assert not signed_in(client)
    assert not User.objects.filter(username="nameless").exists()


def test_a_username_that_is_not_a_portal_username_is_refused(provider):
    claims = {"preferred_username": "alice sso/../x", "groups": ["research"]}
    provider.set_accounts({"odd": {"password": "odd-pw", "claims": claims}})
    client = Client()
    page = refusal_shown(client, sign_in(client, provider, "odd", "odd-pw"))
    assert "which is not a valid portal username" in page
    assert not signed_in(client)
    assert not User.objects.exists()


def test_a_local_account_with_a_password_is_not_taken_over_one_without_is(provider):
    local = make_user("alice-sso")
    client = Client()
    page = refusal_shown(client, sign_in(client, provider, "alice-sso", "alice-idp-pw"))
    assert "sign in with its password" in page
    assert not signed_in(client)
    local.refresh_from_db()
    assert local.has_usable_password() and not local.groups.exists()

    # An account an admin made for single sign-on: no password ("disabled" in the admin).
    local.set_unusable_password()
    local.save()
    assert sign_in(Client(), provider, "alice-sso", "alice-idp-pw")["Location"] == "/jobs/"
    assert User.objects.get(username="alice-sso").account.source == Account.OIDC


def test_unknown_users_are_refused_when_accounts_are_not_made(provider, settings):
    settings.OIDC_CREATE_USER = False
    client = Client()
    page = refusal_shown(client, sign_in(client, provider, "alice-sso", "alice-idp-pw"))
    assert "alice-sso has no account on this portal" in page
    assert not User.objects.exists()


def test_a_replayed_or_cancelled_answer_is_refused_on_the_login_page(provider):
    client = Client()
    start = client.get("/oidc/authenticate/")["Location"]
    back = provider.sign_in(requests.Session(), start, "alice-sso", "alice-idp-pw")
    assert client.get(back.removeprefix(PORTAL))["Location"] == "/jobs/"
    # The same answer again (its state is spent): the login page says so, not an error page.
    page = refusal_shown(client, client.get(back.removeprefix(PORTAL)))
    assert "This sign-in has expired or was already used" in page
    client.post("/logout/")
    # The provider's own refusal (the user cancelled there) is shown as it said it.
    state = parse_qs(urlsplit(client.get("/oidc/authenticate/")["Location"]).query)["state"][0]
    cancelled = client.get(
        "/oidc/callback/",
        {"error": "access_denied", "error_description": "End-User aborted", "state": state},
    )
    page = refusal_shown(client, cancelled)
    assert "Lab IdP did not sign you in (access_denied: End-User aborted)" in page
    assert not signed_in(client)


def test_a_provider_that_does_not_answer_is_named_on_the_login_page(settings):
    point_at(settings, None, issuer=f"http://127.0.0.1:{free_port()}")
    client = Client()
    response = client.get("/oidc/authenticate/")
    assert response.status_code == 302 and response["Location"] == "/login/"
    page = client.get("/login/").content.decode()
    assert "Lab IdP is unavailable" in page and "could not connect" in page
    # The password form is still there for the portal's own accounts.
    assert 'id="id_password"' in page
    make_user("alice")
    assert Client().post("/login/", {"username": "alice", "password": "alice-secret-pw"})[
        "Location"
    ] == ("/jobs/")


def test_sign_out_ends_the_session_here_and_at_the_provider(provider):
    client, browser = Client(), requests.Session()
    sign_in(client, provider, "alice-sso", "alice-idp-pw", browser)
    response = client.post("/logout/")
    assert response.status_code == 302
    at_provider = response["Location"]
    assert at_provider.startswith(f"{provider.issuer}/session/end?")
    query = parse_qs(urlsplit(at_provider).query)
    assert query["post_logout_redirect_uri"] == [LOGIN_PAGE]
    assert query["client_id"] == [provider.client_id]
    assert query["id_token_hint"][0].count(".") == 2  # the ID token of this sign-in
    assert not signed_in(client)

    # The provider takes the hint and the registered URI, ends its session, comes back.
    assert provider.sign_out(browser, at_provider) == LOGIN_PAGE
    # Its session is over: a new sign-in asks for the password again.
    start = Client().get("/oidc/authenticate/")["Location"]
    assert "/interaction/" in provider._follow(browser, start)


def test_a_token_made_with_the_session_works_on_the_api(provider):
    client = Client()
    sign_in(client, provider, "alice-sso", "alice-idp-pw")
    made = client.post("/api/v2/tokens/application")
    assert made.status_code == 200, made.content
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {made.json()['token']}")
    me = api.get("/api/v2/users/me")
    assert me.status_code == 200 and me.json()["username"] == "alice-sso"


def test_authn_info_tells_openpai_clients_how_to_sign_in(settings):
    api = APIClient()
    assert api.get("/api/v1/authn/info").json() == {
        "authn_type": "basic",
        "authnMethod": "basic",
        "loginURI": "/api/v1/authn/basic/login",
        "loginURIMethod": "post",
        "loginPath": "/api/v2/authn/basic/login",
    }
    assert api.get("/api/v2/info").json()["authnMethod"] == "basic"
    assert api.get("/api/v1/authn/oidc/login").status_code == 404
    assert "Sign in with" not in Client().get("/login/").content.decode()

    point_at(settings, None, issuer="https://idp.lab.example/realms/lab")
    v1 = api.get("/api/v1/authn/info").json()
    assert (v1["authn_type"], v1["loginURI"], v1["loginURIMethod"]) == (
        "OIDC",
        "/api/v1/authn/oidc/login",
        "get",
    )
    assert v1["logoutURI"] == "/api/v1/authn/oidc/logout"
    assert api.get("/api/v2/authn/info").json()["loginURI"] == "/api/v2/authn/oidc/login"
    assert api.get("/api/v2/info").json()["authnMethod"] == "OIDC"
    to_sign_in = api.get("/api/v2/authn/oidc/login")
    assert to_sign_in.status_code == 302 and to_sign_in["Location"] == "/oidc/authenticate/"
    assert "Sign in with Lab IdP" in Client().get("/login/").content.decode()


def test_an_id_token_made_for_another_client_is_refused(provider, settings):
    """The ID token's audience is checked (mozilla-django-oidc leaves it unchecked): a token
    the provider signed for another application does not sign anyone in here."""
    id_token = id_token_for_other_app(provider, "alice-sso", "alice-idp-pw")
    backend = oidc.OIDCBackend()
    key = backend.retrieve_matching_jwk(id_token)
    with pytest.raises(oidc.SignInRefused, match="(?i)audience"):
        backend._verify_jws(id_token, key)
    settings.OIDC_RP_CLIENT_ID = OTHER_APP["client_id"]  # the same token, for its own client
    assert oidc.OIDCBackend()._verify_jws(id_token, key)["sub"] == "alice-sso"


def id_token_for_other_app(provider: OidcProvider, login: str, password: str) -> str:
    """The code flow done by hand as ``other-app``: its ID token for ``login``."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    redirect_uri = OTHER_APP["redirect_uris"][0]
    query = {
        "client_id": OTHER_APP["client_id"],
        "response_type": "code",
        "scope": "openid",
        "redirect_uri": redirect_uri,
        "state": "s",
        "nonce": "n",
        "code_challenge": challenge.rstrip(b"=").decode(),
        "code_challenge_method": "S256",
    }
    back = provider.sign_in(
        requests.Session(), f"{provider.issuer}/auth?{urlencode(query)}", login, password
    )
    code = re.search(r"[?&]code=([^&]+)", back)
    assert back.startswith(redirect_uri) and code is not None, back
    answer = requests.post(
        f"{provider.issuer}/token",
        data={
            "grant_type": "authorization_code",
            "code": code.group(1),
            "redirect_uri": redirect_uri,
            "code_verifier": verifier,
        },
        auth=(OTHER_APP["client_id"], OTHER_APP["client_secret"]),
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["id_token"])


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"OIDC_ISSUER": "https://idp.example", "OIDC_CLIENT_ID": "p"}, "OIDC_CLIENT_SECRET"),
        ({"OIDC_ISSUER": "idp.example"}, "OIDC_ISSUER must be a URL"),
        ({"OIDC_SIGN_ALGO": "HS256"}, "OIDC_SIGN_ALGO must be RS* or ES*"),
    ],
)
def test_settings_that_cannot_work_stop_the_start_naming_the_variable(env, said):
    started = subprocess.run(
        [sys.executable, "-c", "import portal.settings"],
        env={**os.environ, **env},
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        check=False,
    )
    assert started.returncode != 0 and said in started.stderr
