"""A real OpenID Connect provider of the test's own: panva's oidc-provider (OpenID Certified,
tests/support/oidc-provider/provider.mjs, installed by ``make oidc-provider``) run by Node on a
free loopback port, with a sign-in page of its own, one confidential client (the portal) and
accounts read from a JSON file at each use: a test changes a user's groups at the provider by
rewriting it (:meth:`OidcProvider.set_accounts`)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import requests

from tests.support.servers import ROOT, free_port, wait_for_port

PROVIDER_DIR = ROOT / "tests" / "support" / "oidc-provider"
CLIENT_ID = "gpu-portal"
CLIENT_SECRET = "portal-client-secret-0123456789abcdef"
GROUPS_SCOPES = "openid email profile groups"

# alice-sso: a researcher (groups research and ml); boss-sso: an admin (portal-admins).
ACCOUNTS: dict[str, dict[str, Any]] = {
    "alice-sso": {
        "password": "alice-idp-pw",
        "claims": {
            "preferred_username": "alice-sso",
            "email": "alice@lab.example",
            "email_verified": True,
            "name": "Alice SSO",
            "groups": ["research", "ml"],
        },
    },
    "boss-sso": {
        "password": "boss-idp-pw",
        "claims": {
            "preferred_username": "boss-sso",
            "email": "boss@lab.example",
            "groups": ["portal-admins"],
        },
    },
}


@dataclass
class OidcProvider:
    issuer: str
    accounts_file: Path

    client_id: str = CLIENT_ID
    client_secret: str = CLIENT_SECRET

    def set_accounts(self, accounts: dict[str, dict[str, Any]]) -> None:
        self.accounts_file.write_text(json.dumps(accounts))

    def portal_env(self) -> dict[str, str]:
        """The portal's settings (as its environment) for this provider."""
        return {
            "OIDC_ISSUER": self.issuer,
            "OIDC_CLIENT_ID": self.client_id,
            "OIDC_CLIENT_SECRET": self.client_secret,
            "OIDC_SCOPES": GROUPS_SCOPES,
            "OIDC_PROVIDER_NAME": "Lab IdP",
        }

    def sign_in(
        self, browser: requests.Session, authorize_url: str, login: str, password: str
    ) -> str:
        """What a person does at the provider: from the portal's authorization request, its
        sign-in page, filled in and sent; returns the URL the provider sends the browser back
        to (the portal's redirect URI with the code, or with an error)."""
        url = self._follow(browser, authorize_url)
        page = browser.get(url, timeout=30)
        page.raise_for_status()
        form = re.search(r'<form method="post" action="([^"]+)"', page.text)
        assert form is not None, page.text
        answer = browser.post(
            urljoin(url, form.group(1)),
            data={"login": login, "password": password},
            allow_redirects=False,
            timeout=30,
        )
        assert answer.status_code == 303, answer.text
        return self._follow(browser, urljoin(url, answer.headers["location"]))

    def _follow(self, browser: requests.Session, url: str) -> str:
        """Follows the provider's redirects; the first URL off the provider (or its sign-in
        page)."""
        for _ in range(10):
            if not url.startswith(self.issuer) or "/interaction/" in url:
                return url
            answer = browser.get(url, allow_redirects=False, timeout=30)
            if answer.status_code not in (302, 303):
                raise AssertionError(f"{url}: {answer.status_code} {answer.text[:2000]}")
            url = urljoin(url, answer.headers["location"])
        raise AssertionError(f"too many redirects from {url}")

    def sign_out(self, browser: requests.Session, end_session_url: str) -> str:
        """The provider's sign-out page, confirmed ("Yes, sign me out"); returns where it sends
        the browser back to."""
        page = browser.get(end_session_url, timeout=30)
        assert page.status_code == 200, page.text[:2000]
        action = re.search(r'<form [^>]*action="([^"]+)"', page.text)
        xsrf = re.search(r'name="xsrf" value="([^"]+)"', page.text)
        assert action is not None and xsrf is not None, page.text
        answer = browser.post(
            urljoin(end_session_url, action.group(1)),
            data={"xsrf": xsrf.group(1), "logout": "yes"},
            allow_redirects=False,
            timeout=30,
        )
        assert answer.status_code in (302, 303), answer.text[:2000]
        return urljoin(end_session_url, answer.headers["location"])


@contextmanager
def oidc_provider(
    where: Path,
    redirect_uris: list[str],
    post_logout_redirect_uris: list[str],
    accounts: dict[str, dict[str, Any]] | None = None,
    port: int | None = None,
    extra_clients: list[dict[str, Any]] | None = None,
) -> Iterator[OidcProvider]:
    """The provider on ``port`` (else a free one), its files under ``where``; stopped at the
    end. ``extra_clients``: more clients' metadata (a portal that is not this test's)."""
    node = shutil.which("node")
    assert node, "Node.js is needed for the OIDC provider (it is for `make install` too)"
    assert (PROVIDER_DIR / "node_modules" / "oidc-provider").is_dir(), (
        "the test OIDC provider is not installed: run `make oidc-provider`"
    )
    port = port or free_port()
    where.mkdir(parents=True, exist_ok=True)
    provider = OidcProvider(
        issuer=f"http://127.0.0.1:{port}", accounts_file=where / "accounts.json"
    )
    provider.set_accounts(ACCOUNTS if accounts is None else accounts)
    client = {
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "redirect_uris": redirect_uris,
        "post_logout_redirect_uris": post_logout_redirect_uris,
    }
    config = where / "provider.json"
    config.write_text(
        json.dumps(
            {
                "port": port,
                "issuer": provider.issuer,
                "accounts_file": str(provider.accounts_file),
                "clients": [client, *(extra_clients or [])],
            }
        )
    )
    log = (where / "provider.log").open("wb")
    process = subprocess.Popen(
        [node, str(PROVIDER_DIR / "provider.mjs"), str(config)],
        cwd=PROVIDER_DIR,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        try:
            wait_for_port(port, process, "oidc-provider")
        except RuntimeError as exc:  # exited, or did not listen: which, and what it said
            raise RuntimeError(f"{exc}: {(where / 'provider.log').read_text()}") from None
        yield provider
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
