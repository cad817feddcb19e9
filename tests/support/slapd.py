"""A real OpenLDAP server (Debian's ``slapd``) of the test's own: a throwaway configuration and
database under a temporary directory, a small directory loaded with ``slapadd`` before it
starts, listening on a free loopback port, stopped at the end. Tests change its directory with
ldap-utils' ``ldapmodify`` as its root DN, as an administrator of the directory would."""

from __future__ import annotations

import datetime
import ipaddress
import shutil
import subprocess
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.support.servers import free_port, wait_for_port

SLAPD = "/usr/sbin/slapd"
SUFFIX = "dc=lab,dc=example"
ROOT_DN = f"cn=root,{SUFFIX}"
ROOT_PASSWORD = "root-secret-pw"
# The portal's service account: it may read the directory (anonymous binds may not).
SERVICE_DN = f"cn=portal,ou=services,{SUFFIX}"
SERVICE_PASSWORD = "portal-service-pw"
PEOPLE = f"ou=people,{SUFFIX}"
GROUPS = f"ou=groups,{SUFFIX}"

CONFIG = """\
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/nis.schema
include /etc/ldap/schema/inetorgperson.schema
pidfile {dir}/slapd.pid
argsfile {dir}/slapd.args
modulepath /usr/lib/ldap
moduleload back_mdb
{tls}
database mdb
suffix "{suffix}"
rootdn "{root_dn}"
rootpw {root_password}
directory {dir}/data
maxsize 16777216
access to attrs=userPassword
    by anonymous auth
    by * none
access to *
    by dn.exact="{service_dn}" read
    by self read
    by * none
"""

# alice-ldap: in research; bob-ldap: in no group; carol-admin and dave-admin: in portal-admins
# (a groupOfNames must keep a member), carol in research too.
DIRECTORY = """\
dn: {suffix}
objectClass: dcObject
objectClass: organization
o: Lab
dc: lab

dn: ou=services,{suffix}
objectClass: organizationalUnit
ou: services

dn: {service_dn}
objectClass: organizationalRole
objectClass: simpleSecurityObject
cn: portal
userPassword: {service_password}

dn: {people}
objectClass: organizationalUnit
ou: people

dn: {groups}
objectClass: organizationalUnit
ou: groups
{users}
dn: cn=research,{groups}
objectClass: groupOfNames
cn: research
member: uid=alice-ldap,{people}
member: uid=carol-admin,{people}

dn: cn=portal-admins,{groups}
objectClass: groupOfNames
cn: portal-admins
member: uid=carol-admin,{people}
member: uid=dave-admin,{people}

dn: cn=research-posix,{groups}
objectClass: posixGroup
cn: research-posix
gidNumber: 5000
memberUid: alice-ldap
"""

USER = """
dn: uid={uid},{people}
objectClass: inetOrgPerson
uid: {uid}
cn: {given} {sn}
givenName: {given}
sn: {sn}
mail: {uid}@lab.example
userPassword: {uid}-directory-pw
"""

USERS = [("alice-ldap", "Alice", "Liddell"), ("bob-ldap", "Bob", "Builder")]
USERS += [("carol-admin", "Carol", "Admin"), ("dave-admin", "Dave", "Admin")]


def password_of(uid: str) -> str:
    return f"{uid}-directory-pw"


class Slapd:
    """``slapd`` on ``127.0.0.1:port`` with the directory above; ``tls`` gives it a certificate
    of a CA of its own (``ca_file``) for StartTLS."""

    def __init__(self, where: Path, tls: bool = False) -> None:
        self.dir = where
        self.port = free_port()
        self.uri = f"ldap://127.0.0.1:{self.port}"
        self.ca_file: Path | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "data").mkdir(exist_ok=True)
        tls_lines = self._make_certificate() if tls else ""
        self.config = self.dir / "slapd.conf"
        self.config.write_text(
            CONFIG.format(
                dir=self.dir,
                tls=tls_lines,
                suffix=SUFFIX,
                root_dn=ROOT_DN,
                root_password=ROOT_PASSWORD,
                service_dn=SERVICE_DN,
            )
        )
        users = "".join(
            USER.format(uid=uid, given=given, sn=sn, people=PEOPLE) for uid, given, sn in USERS
        )
        ldif = self.dir / "directory.ldif"
        ldif.write_text(
            DIRECTORY.format(
                suffix=SUFFIX,
                service_dn=SERVICE_DN,
                service_password=SERVICE_PASSWORD,
                people=PEOPLE,
                groups=GROUPS,
                users=users,
            )
        )
        subprocess.run(
            ["/usr/sbin/slapadd", "-f", str(self.config), "-l", str(ldif)],
            check=True,
            capture_output=True,
        )

    def start(self) -> None:
        self.process = subprocess.Popen(
            [SLAPD, "-f", str(self.config), "-h", f"{self.uri}/", "-d", "0"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port, self.process, "slapd")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(15)
        self.process = None

    def modify(self, ldif: str) -> None:
        """``ldapmodify`` as the directory's root: ``changetype`` records (add, delete,
        modify)."""
        done = subprocess.run(
            ["/usr/bin/ldapmodify", "-x", "-H", self.uri, "-D", ROOT_DN, "-w", ROOT_PASSWORD],
            input=ldif.encode(),
            capture_output=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr.decode()

    def delete_user(self, uid: str) -> None:
        self.modify(f"dn: uid={uid},{PEOPLE}\nchangetype: delete\n")

    def remove_member(self, group: str, uid: str) -> None:
        self.modify(
            f"dn: cn={group},{GROUPS}\nchangetype: modify\n"
            f"delete: member\nmember: uid={uid},{PEOPLE}\n"
        )

    def _make_certificate(self) -> str:
        """A CA and a certificate of 127.0.0.1 signed by it; the config lines that use them."""
        now = datetime.datetime.now(datetime.UTC)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test directory CA")])
        ca = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256())
        )
        key = ec.generate_private_key(ec.SECP256R1())
        host = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
        certificate = (
            x509.CertificateBuilder()
            .subject_name(host)
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())
        )
        self.ca_file = self.dir / "ca.pem"
        self.ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        (self.dir / "server.pem").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        (self.dir / "server.key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return (
            f"TLSCACertificateFile {self.ca_file}\n"
            f"TLSCertificateFile {self.dir / 'server.pem'}\n"
            f"TLSCertificateKeyFile {self.dir / 'server.key'}\n"
        )


def slapd_installed() -> bool:
    return Path(SLAPD).exists() and shutil.which("ldapmodify") is not None
