"""Single sign-on in Chromium: "Sign in with Lab IdP" on the login page, the real provider's
own sign-in page (panva's oidc-provider, started by the test), back on the job list with the
virtual clusters of the user's groups at the provider; a token made with that session works
on the API; sign-out ends the portal's session and the provider's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from django.contrib.auth.models import Group, User

from accounts.models import Account
from clusters.models import VirtualCluster
from tests.support.oidc_provider import (
    CLIENT_ID,
    CLIENT_SECRET,
    GROUPS_SCOPES,
    OidcProvider,
    oidc_provider,
)
from tests.support.servers import free_port, web_server

pytestmark = pytest.mark.browser


@pytest.fixture
def sso_portal(tmp_path: Path, transactional_db, settings) -> Iterator[tuple[str, OidcProvider]]:  # type: ignore[no-untyped-def]
    """The portal (uvicorn), set up for the provider as README says (the provider's port
    chosen first: each needs the other's address), then the provider, which knows the
    portal's redirect URIs."""
    port = free_port()
    with (
        web_server(
            CHANNEL_LAYER_PREFIX=settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"],
            CELERY_TASK_ALWAYS_EAGER="True",
            OIDC_ISSUER=f"http://127.0.0.1:{port}",
            OIDC_CLIENT_ID=CLIENT_ID,
            OIDC_CLIENT_SECRET=CLIENT_SECRET,
            OIDC_SCOPES=GROUPS_SCOPES,
            OIDC_PROVIDER_NAME="Lab IdP",
            DIRECTORY_GROUPS="research=research",
            DIRECTORY_ADMIN_GROUPS="portal-admins",
        ) as url,
        oidc_provider(
            tmp_path / "idp",
            redirect_uris=[f"{url}/oidc/callback/"],
            post_logout_redirect_uris=[f"{url}/login/"],
            port=port,
        ) as provider,
    ):
        yield url, provider


def test_sign_in_with_the_idp_lands_on_the_job_list_with_the_groups_vcs(sso_portal, browser_page):
    url, _ = sso_portal
    research = VirtualCluster.objects.create(name="research")
    research.groups.add(Group.objects.create(name="research"))
    VirtualCluster.objects.create(name="secret").groups.add(Group.objects.create(name="other"))
    page = browser_page

    page.goto(f"{url}/jobs/")
    page.wait_for_url(f"{url}/login/?next=/jobs/")
    assert page.locator("#id_password").is_visible()  # the password form is still there
    page.click("text=Sign in with Lab IdP")
    page.locator("text=Test IdP").wait_for()  # the provider's own page
    page.fill("#login", "alice-sso")
    page.fill("#password", "alice-idp-pw")
    page.click("text=Sign in at the IdP")
    page.wait_for_url(f"{url}/jobs/")
    assert page.locator("header .who span").inner_text() == "alice-sso"
    alice = User.objects.get(username="alice-sso")
    assert alice.account.source == Account.OIDC

    page.goto(f"{url}/virtual-clusters/")
    assert page.locator("#vc-research").is_visible()
    assert page.locator("#vc-secret").count() == 0

    # A token made with this session (as OpenPAI's web portal makes one) works on the API.
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    made = page.request.post(
        f"{url}/api/v2/tokens/application", headers={"X-CSRFToken": csrf, "Referer": url}
    )
    assert made.ok, made.text()
    token = made.json()["token"]
    me = requests.get(
        f"{url}/api/v2/users/me", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    assert me.status_code == 200 and me.json()["username"] == "alice-sso"

    # Sign-out: the portal's session ends, then the provider's (its own confirmation page).
    page.click("header .who button")
    page.click("text=Yes, sign me out")
    page.wait_for_url(f"{url}/login/")
    page.goto(f"{url}/jobs/")
    page.wait_for_url(f"{url}/login/?next=/jobs/")
    # The provider asks for the password again: its session is over too.
    page.click("text=Sign in with Lab IdP")
    page.locator("#login").wait_for()
