"""A real OpenLDAP server per test (tests/support/slapd.py), and the portal's LDAP settings
pointed at it, as an admin would set them from the environment."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import slapd as directory
from tests.support.slapd import Slapd


@pytest.fixture
def slapd(tmp_path: Path) -> Iterator[Slapd]:
    if not directory.slapd_installed():
        pytest.fail("slapd and ldap-utils are not installed: run `make slapd`")
    server = Slapd(tmp_path / "slapd")
    server.start()
    yield server
    server.stop()


def point_at(settings, server: Slapd) -> None:  # type: ignore[no-untyped-def]
    """The settings of README's worked example, on ``server``."""
    settings.LDAP_SERVER_URI = server.uri
    settings.LDAP_BIND_DN = directory.SERVICE_DN
    settings.LDAP_BIND_PASSWORD = directory.SERVICE_PASSWORD
    settings.LDAP_USER_SEARCH_BASE = directory.PEOPLE
    settings.LDAP_USER_FILTER = "(uid={username})"
    settings.LDAP_GROUP_SEARCH_BASE = directory.GROUPS
    settings.LDAP_GROUP_TYPE = "groupOfNames"
    settings.LDAP_START_TLS = False
    settings.LDAP_CA_FILE = ""
    settings.LDAP_TIMEOUT_SECONDS = 5
    settings.DIRECTORY_GROUPS = {"research": "research"}
    settings.DIRECTORY_ADMIN_GROUPS = ["portal-admins"]
    settings.DIRECTORY_RECHECK_SECONDS = 300.0
    settings.LOCAL_ACCOUNTS = True
    settings.AUTHENTICATION_BACKENDS = [
        "accounts.ldap_backend.LDAPBackend",
        "accounts.ldap_backend.LocalAccountBackend",
    ]


@pytest.fixture
def ldap_on(settings, slapd: Slapd) -> Slapd:  # type: ignore[no-untyped-def]
    point_at(settings, slapd)
    return slapd
