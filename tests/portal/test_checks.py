"""Bad settings are reported by Django's system checks, each with its id, before anything
starts; reading the settings writes no file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.checks import run_checks

ROOT = Path(__file__).resolve().parents[2]


def portal_errors() -> dict[str, str]:
    return {e.id: e.msg for e in run_checks(tags=["portal"]) if e.id.startswith("portal.")}


def test_the_settings_the_tests_run_with_pass_the_checks():
    assert portal_errors() == {}


@pytest.mark.parametrize(
    ("name", "value", "check_id"),
    [
        ("CLUSTER_BACKEND", "slurm", "portal.E001"),
        ("REDIS_URL", "http://127.0.0.1:6379/0", "portal.E002"),
        ("API_APPLICATION_TOKEN_SECONDS", -1, "portal.E003"),
        ("LOCAL_STOP_GRACE_SECONDS", -0.5, "portal.E003"),
        ("K8S_NODE_SELECTOR", ["gpu"], "portal.E005"),
    ],
)
def test_a_bad_setting_is_an_error_with_its_id_naming_it(settings, name, value, check_id):
    setattr(settings, name, value)
    errors = portal_errors()
    assert list(errors) == [check_id]
    assert name in errors[check_id]


def test_a_rate_drf_cannot_read_is_an_error(settings):
    rates = {"user": "1200 per minute", "anon": "120/minute"}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    assert portal_errors() == {"portal.E004": "API_RATE_USER is '1200 per minute'"}


def test_manage_py_check_refuses_a_bad_backend_before_anything_runs(tmp_path):
    run = subprocess.run(
        [sys.executable, "manage.py", "check"],
        env={**os.environ, "CLUSTER_BACKEND": "slurm", "PORTAL_VAR_DIR": str(tmp_path)},
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1
    assert "(portal.E001) CLUSTER_BACKEND is 'slurm'" in run.stderr


def test_reading_the_settings_writes_nothing_and_setup_keeps_one_secret_key(tmp_path):
    var = tmp_path / "var"
    env = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    env.update(PORTAL_VAR_DIR=str(var), DJANGO_SETTINGS_MODULE="portal.settings")
    imported = "import os, portal.settings; print(os.path.exists(os.environ['PORTAL_VAR_DIR']))"
    setup = "import django; django.setup(); from django.conf import settings; "
    setup += "print(settings.SECRET_KEY)"

    def run(code: str) -> str:
        return subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()

    assert run(imported) == "False"
    key = run(setup)
    assert len(key) > 40
    assert (var / "secret_key").read_text().strip() == key
    assert oct((var / "secret_key").stat().st_mode & 0o777) == "0o600"
    assert run(setup) == key  # kept: sessions survive a restart
