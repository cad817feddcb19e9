"""Bad settings are reported by Django's system checks, each with its id, before anything
starts; reading the settings writes no file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.checks import run_checks

from portal.checks import open_database
from tests.support.servers import free_port

ROOT = Path(__file__).resolve().parents[2]


def portal_errors() -> dict[str, str]:
    return {e.id: e.msg for e in run_checks(tags=["portal"]) if e.id.startswith("portal.")}


def test_the_settings_the_tests_run_with_pass_the_checks():
    assert portal_errors() == {}


@pytest.mark.parametrize(
    ("name", "value", "check_id"),
    [
        ("CLUSTER_BACKEND", "yarn", "portal.E001"),
        ("REDIS_URL", "http://127.0.0.1:6379/0", "portal.E002"),
        ("API_APPLICATION_TOKEN_SECONDS", -1, "portal.E003"),
        ("LOCAL_STOP_GRACE_SECONDS", -0.5, "portal.E003"),
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
        env={**os.environ, "CLUSTER_BACKEND": "yarn", "PORTAL_VAR_DIR": str(tmp_path)},
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1
    assert "(portal.E001) CLUSTER_BACKEND is 'yarn'" in run.stderr


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


def test_tasks_beside_a_redis_without_a_password_stop_the_local_backend_when_unfenced(
    settings, redis_server
):
    """Without the task firewall (off here; as an ordinary user, or without nft, alike) a
    task could use the broker and the reconcile lock: the portal does not start, and the hint
    names the setting that allows it on purpose."""
    settings.REDIS_URL = redis_server.url
    settings.LOCAL_FIREWALL = "off"
    errors = {e.id: e for e in run_checks(tags=["portal"])}  # E007 too on an open database
    assert (
        f"Redis (REDIS_URL, 127.0.0.1:{redis_server.port}) without a password"
        in errors["portal.E006"].msg
    )
    assert "the task firewall is not set: LOCAL_FIREWALL is off" in errors["portal.E006"].msg
    assert "LOCAL_ALLOW_OPEN_SERVICES=true" in str(errors["portal.E006"].hint)

    settings.LOCAL_ALLOW_OPEN_SERVICES = True  # on purpose
    assert portal_errors() == {}


def test_not_root_is_unfenced_too(settings, redis_server, monkeypatch):
    settings.REDIS_URL = redis_server.url
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "the portal does not run as root" in portal_errors()["portal.E006"]


@pytest.mark.skipif(os.geteuid() != 0 and not os.environ.get("CI"), reason="the firewall: root")
def test_with_the_task_firewall_a_redis_of_this_host_without_a_password_is_out_of_reach(
    settings, redis_server
):
    settings.REDIS_URL = redis_server.url
    assert portal_errors() == {}


def test_a_redis_with_a_password_or_none_answering_is_no_error(settings, redis_server):
    settings.LOCAL_FIREWALL = "off"
    settings.REDIS_URL = f"redis://:wrong-but-some@127.0.0.1:{redis_server.port}/0"
    assert "portal.E006" not in portal_errors()
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing there
    assert "portal.E006" not in portal_errors()
    settings.REDIS_URL = redis_server.url
    settings.CLUSTER_BACKEND = "kubernetes"  # its pods do not share this host's network
    assert portal_errors() == {}


@pytest.mark.parametrize(
    ("engine", "host", "password", "open_"),
    [
        ("postgresql", "127.0.0.1", "", True),
        ("postgresql", "localhost", "", True),
        ("mysql", "::1", "", True),
        ("postgresql", "127.0.0.1", "s3cret", False),
        ("postgresql", "", "", False),  # its socket: hidden in every sandbox
        ("postgresql", "/run/postgresql", "", False),
        ("sqlite3", "", "", False),
    ],
)
def test_a_database_tasks_could_use_without_a_password_is_an_error_when_unfenced(
    engine, host, password, open_
):
    database = {"ENGINE": f"django.db.backends.{engine}", "HOST": host, "PORT": 5432}
    database["PASSWORD"] = password
    error = open_database("LOCAL_FIREWALL is off", database)
    assert (error is not None) == open_
    if error is not None:
        assert error.id == "portal.E007"
        assert f"database (DATABASE_URL, {host}:5432)" in error.msg
        assert "LOCAL_ALLOW_OPEN_SERVICES=true" in str(error.hint)
    assert open_database(None, database) is None  # fenced: this host's ports are out of reach


def test_a_database_on_another_host_without_a_password_is_an_error_fenced_or_not():
    """The firewall keeps tasks from this host only; another host they reach as it does."""
    database = {"ENGINE": "django.db.backends.postgresql", "HOST": "192.0.2.250", "PORT": 5432}
    error = open_database(None, database)
    assert error is not None and "192.0.2.250 is another host" in error.msg


def test_the_slurm_backend_without_slurms_commands_is_an_error_naming_them(settings, monkeypatch):
    settings.CLUSTER_BACKEND = "slurm"
    monkeypatch.setenv("PATH", "/nowhere")
    errors = portal_errors()
    assert list(errors) == ["portal.E008"]
    assert "sbatch, squeue, scancel, srun, sinfo, scontrol" in errors["portal.E008"]


def test_the_slurm_backend_on_a_submit_host_is_no_error(settings):
    settings.CLUSTER_BACKEND = "slurm"
    assert portal_errors() == {}  # make test installs slurm-client
