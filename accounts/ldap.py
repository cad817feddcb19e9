"""The lab's LDAP directory (OpenLDAP, Active Directory, FreeIPA), asked with ldap3: pure
Python, so ``make run`` needs no C compiler nor libldap's headers (python-ldap, which
django-auth-ldap is built on, has no wheels).

Search, then bind: the portal binds as its service account (``LDAP_BIND_DN``; anonymous when
empty), finds the one entry that ``LDAP_USER_FILTER`` names under ``LDAP_USER_SEARCH_BASE``,
reads the groups that hold it, and checks a password by binding as that entry. An entry the
filter does not find is not in the directory, as far as the portal is concerned: a filter
that leaves disabled accounts out makes them "removed" too. Every connection is opened and
closed within one call (no pool to go stale); a directory that does not answer within
``LDAP_TIMEOUT_SECONDS`` raises :class:`DirectoryUnavailable`, which callers tell apart from
"no such user"."""

from __future__ import annotations

import logging
import re
import ssl
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

import ldap3
from django.conf import settings
from ldap3.core.exceptions import LDAPException
from ldap3.utils.conv import escape_filter_chars
from ldap3.utils.dn import parse_dn

logger = logging.getLogger(__name__)

# How each kind of group records its members: an attribute holding the member's DN or name.
# memberOf: the user's own attribute lists their groups' DNs (Active Directory, OpenLDAP with
# the memberof overlay); no group search.
GROUP_FILTERS = {
    "groupOfNames": "(&(objectClass=groupOfNames)(member={dn}))",
    "groupOfUniqueNames": "(&(objectClass=groupOfUniqueNames)(uniqueMember={dn}))",
    "posixGroup": "(&(objectClass=posixGroup)(memberUid={username}))",
}
GROUP_TYPES = (*GROUP_FILTERS, "memberOf")
# Django's own rule for a username (UnicodeUsernameValidator); the API's paths assume it.
USERNAME = re.compile(r"^[\w.@+-]{1,150}\Z")


class DirectoryUnavailable(Exception):
    """The directory did not answer (down, unreachable, TLS refused, the service bind
    refused): nothing is known of the account."""


@dataclass(frozen=True)
class DirectoryUser:
    dn: str
    username: str
    email: str = ""
    first_name: str = ""
    last_name: str = ""
    groups: frozenset[str] = field(default_factory=frozenset)


def configured() -> bool:
    return bool(settings.LDAP_SERVER_URI)


def find(username: str) -> DirectoryUser | None:
    """The directory's entry of ``username`` (the name typed at sign-in, or a portal user's
    name) with its groups; None when the directory holds no (or more than one) such entry, or
    one whose ``LDAP_USERNAME_ATTRIBUTE`` is not ``username`` (but for case)."""
    with _connection(settings.LDAP_BIND_DN, settings.LDAP_BIND_PASSWORD) as conn:
        if not conn.bind():
            raise DirectoryUnavailable(f"the service bind was refused: {_result(conn)}")
        return _lookup(conn, username)


def password_matches(user: DirectoryUser, password: str) -> bool:
    """Whether ``password`` is ``user``'s: a bind as their entry. An empty password is never
    right (LDAP takes a bind with a DN and no password as an anonymous one, RFC 4513 5.1.2)."""
    if not password:
        return False
    with _connection(user.dn, password) as conn:
        if conn.bind():
            return True
        if conn.result.get("description") == "invalidCredentials":
            return False
        raise DirectoryUnavailable(f"the bind as {user.dn} failed: {_result(conn)}")


def _lookup(conn: ldap3.Connection, username: str) -> DirectoryUser | None:
    attributes = {
        "username": settings.LDAP_USERNAME_ATTRIBUTE,
        "email": settings.LDAP_EMAIL_ATTRIBUTE,
        "first_name": settings.LDAP_FIRST_NAME_ATTRIBUTE,
        "last_name": settings.LDAP_LAST_NAME_ATTRIBUTE,
    }
    wanted = [name for name in attributes.values() if name]
    if settings.LDAP_GROUP_TYPE == "memberOf":
        wanted.append("memberOf")
    search_filter = settings.LDAP_USER_FILTER.replace("{username}", escape_filter_chars(username))
    _search(conn, settings.LDAP_USER_SEARCH_BASE, search_filter, wanted, size_limit=2)
    entries = [entry for entry in conn.response or [] if entry.get("type") == "searchResEntry"]
    if len(entries) != 1:
        if entries:
            logger.warning("LDAP: %d entries match %r; refused", len(entries), search_filter)
        return None
    dn, found = entries[0]["dn"], entries[0]["attributes"]
    values = {key: _first(found.get(name)) if name else "" for key, name in attributes.items()}
    name = values.pop("username")
    if not USERNAME.match(name):
        logger.warning("LDAP: %s has no usable %s (%r)", dn, attributes["username"], name)
        return None
    if name.casefold() != username.casefold():
        # The portal looks the account up again by its username: the filter must match the
        # username attribute, or a later check would miss the entry and deactivate the user.
        logger.warning("LDAP: %s's %s is %r, not %r", dn, attributes["username"], name, username)
        return None
    return DirectoryUser(dn=dn, username=name, groups=_groups(conn, dn, name, found), **values)


def _groups(
    conn: ldap3.Connection, dn: str, username: str, found: dict[str, object]
) -> frozenset[str]:
    """The names (``cn``) of the groups that hold the entry ``dn``."""
    if settings.LDAP_GROUP_TYPE == "memberOf":
        member_of = found.get("memberOf") or []
        dns = member_of if isinstance(member_of, list) else [member_of]
        return frozenset(filter(None, (_cn(str(group)) for group in dns)))
    if not settings.LDAP_GROUP_SEARCH_BASE:
        return frozenset()
    group_filter = GROUP_FILTERS[settings.LDAP_GROUP_TYPE].format(
        dn=escape_filter_chars(dn), username=escape_filter_chars(username)
    )
    _search(conn, settings.LDAP_GROUP_SEARCH_BASE, group_filter, ["cn"])
    names = (
        _first(entry["attributes"].get("cn"))
        for entry in conn.response or []
        if entry.get("type") == "searchResEntry"
    )
    return frozenset(name for name in names if name)


def _search(
    conn: ldap3.Connection, base: str, search_filter: str, attributes: list[str], **extra: int
) -> None:
    conn.search(base, search_filter, ldap3.SUBTREE, attributes=attributes, **extra)
    # noSuchObject: the base is gone, so nothing under it matches; sizeLimitExceeded: more
    # than one user matched (the caller refuses that).
    if conn.result.get("description") not in ("success", "noSuchObject", "sizeLimitExceeded"):
        raise DirectoryUnavailable(f"the search under {base!r} failed: {_result(conn)}")


@contextmanager
def _connection(user: str, password: str) -> Iterator[ldap3.Connection]:
    """An opened (and StartTLS'd, when asked) connection, unbound at the end; every failure
    to talk to the server is a :class:`DirectoryUnavailable`."""
    tls = None
    if settings.LDAP_START_TLS or settings.LDAP_CA_FILE:
        tls = ldap3.Tls(validate=ssl.CERT_REQUIRED, ca_certs_file=settings.LDAP_CA_FILE or None)
    timeout = settings.LDAP_TIMEOUT_SECONDS
    server = ldap3.Server(
        settings.LDAP_SERVER_URI, tls=tls, connect_timeout=timeout, get_info=ldap3.NONE
    )
    conn = ldap3.Connection(
        server,
        user=user or None,
        password=password or None,
        receive_timeout=timeout,
        read_only=True,
        raise_exceptions=False,
    )
    try:
        conn.open(read_server_info=False)
        if settings.LDAP_START_TLS and not conn.start_tls(read_server_info=False):
            raise DirectoryUnavailable(f"StartTLS was refused: {_result(conn)}")
        yield conn
    except LDAPException as exc:
        raise DirectoryUnavailable(f"{settings.LDAP_SERVER_URI}: {exc}") from exc
    finally:
        with suppress(LDAPException):
            conn.unbind()
        if conn.socket is not None:  # ldap3 leaves the socket of a refused connection open
            conn.socket.close()


def _first(value: object) -> str:
    if isinstance(value, list):
        return str(value[0]) if value else ""
    return "" if value is None else str(value)


def _cn(dn: str) -> str:
    """The name of a group from its DN: the value of its first RDN (``cn=research,...``)."""
    try:
        return str(parse_dn(dn)[0][1])
    except (LDAPException, IndexError):
        return ""


def _result(conn: ldap3.Connection) -> str:
    result = conn.result or {}
    return f"{result.get('description', 'no answer')} {result.get('message', '')}".strip()
