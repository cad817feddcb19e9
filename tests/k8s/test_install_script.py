"""deploy/kubernetes/install.sh against a fake ``kubectl`` that records its calls: the Secret is
made once, with a key made on the spot that nobody sees, and the manifests are applied."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_manifests import DEPLOY, binding_namespace

SCRIPT = DEPLOY / "install.sh"
# A cluster as kubectl shows it: every call in ``calls``; ``get secret`` fails until ``create
# secret`` has stored what came on its stdin (the --from-env-file) in ``secret``.
FAKE_KUBECTL = """#!/bin/sh
here=$(dirname "$0")
printf '%s\\n' "$*" >> "$here/calls"
case " $* " in
  *" get secret "*) [ -f "$here/secret" ] ;;
  *" create secret "*) cat > "$here/secret" ;;
esac
"""
SETTINGS = {
    "DATABASE_URL": "postgres://portal:s3cr=t#x@db.internal:5432/portal",
    "REDIS_URL": "redis://redis.internal:6379/0",
    "ALLOWED_HOSTS": "portal.example.com",
}


@dataclass
class Cluster:
    bin: Path

    def install(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        environ = {"PATH": f"{self.bin}:{os.environ['PATH']}", **env}
        return subprocess.run(["sh", str(SCRIPT), *args], env=environ, capture_output=True,
                              text=True, timeout=30, check=False)  # fmt: skip

    def calls(self) -> list[str]:
        path = self.bin / "calls"
        return path.read_text().splitlines() if path.exists() else []

    def secret(self) -> dict[str, str]:
        lines = (self.bin / "secret").read_text().splitlines()
        return dict(line.split("=", 1) for line in lines)


def new_cluster(root: Path) -> Cluster:
    root.mkdir()
    kubectl = root / "kubectl"
    kubectl.write_text(FAKE_KUBECTL)
    kubectl.chmod(0o755)
    return Cluster(root)


@pytest.fixture
def cluster(tmp_path: Path) -> Cluster:
    return new_cluster(tmp_path / "bin")


def test_it_refuses_to_run_without_database_url(cluster: Cluster):
    settings = {k: v for k, v in SETTINGS.items() if k != "DATABASE_URL"}
    done = cluster.install(**settings)
    assert done.returncode != 0
    assert "DATABASE_URL is not set" in done.stderr
    assert not [call for call in cluster.calls() if "create secret" in call or "apply" in call]


def test_it_makes_a_new_key_for_each_install_and_never_shows_it(tmp_path: Path):
    secrets = []
    for name in ("one", "two"):
        cluster = new_cluster(tmp_path / name)
        done = cluster.install(**SETTINGS)
        assert done.returncode == 0, done.stderr
        secret = cluster.secret()
        assert {k: secret[k] for k in SETTINGS} == SETTINGS  # verbatim, = and # included
        assert len(secret["SECRET_KEY"]) >= 40
        assert len(secret["PORTAL_ADMIN_PASSWORD"]) >= 20
        for value in (
            secret["SECRET_KEY"],
            secret["PORTAL_ADMIN_PASSWORD"],
            SETTINGS["DATABASE_URL"],
        ):
            assert value not in done.stdout + done.stderr
            assert value not in "\n".join(cluster.calls())  # nor on kubectl's command line
        secrets.append(secret)
    assert secrets[0]["SECRET_KEY"] != secrets[1]["SECRET_KEY"]
    assert secrets[0]["PORTAL_ADMIN_PASSWORD"] != secrets[1]["PORTAL_ADMIN_PASSWORD"]


def test_a_second_run_keeps_the_secret_and_needs_no_settings(cluster: Cluster):
    assert cluster.install(**SETTINGS).returncode == 0
    first = cluster.secret()
    done = cluster.install()
    assert done.returncode == 0, done.stderr
    assert "exists" in done.stdout
    assert cluster.secret() == first
    assert len([call for call in cluster.calls() if "create secret" in call]) == 1


def test_it_applies_the_manifests_in_the_namespace_the_binding_names(cluster: Cluster):
    assert cluster.install(**SETTINGS).returncode == 0
    namespace = binding_namespace()
    create = next(call for call in cluster.calls() if "create secret" in call)
    assert create.startswith(f"-n {namespace} create secret generic gpu-portal-env ")
    assert cluster.calls()[-1] == f"-n {namespace} apply -f {DEPLOY}/"


def test_it_refuses_a_namespace_the_binding_does_not_name(cluster: Cluster):
    done = cluster.install("elsewhere", **SETTINGS)
    assert done.returncode != 0
    assert "rbac.yaml" in done.stderr
    assert cluster.calls() == []
