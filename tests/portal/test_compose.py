"""docker-compose.yml's shape (tests/compose/test_stack.py runs it): every long-running service
starts again by itself, the ones that answer have a healthcheck, no password is written in it."""

from __future__ import annotations

from pathlib import Path

import yaml

COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.yml"


def test_every_long_running_service_restarts_and_has_a_healthcheck():
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    one_shots = {"secrets"}
    for name, service in services.items():
        if name not in one_shots:
            assert service.get("restart") in ("unless-stopped", "always", "on-failure"), name
            assert service["healthcheck"]["test"], name


def test_the_portal_waits_for_healthy_services_and_reads_its_urls_from_the_secrets_volume():
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    portal = services["portal"]
    assert portal["depends_on"] == {
        "postgres": {"condition": "service_healthy"},
        "redis": {"condition": "service_healthy"},
    }
    assert portal["environment"]["DATABASE_URL_FILE"].startswith("/var/lib/portal/secrets/")
    assert portal["environment"]["REDIS_URL_FILE"].startswith("/var/lib/portal/secrets/")
    assert "secrets:/var/lib/portal/secrets:ro" in portal["volumes"]  # under the hidden var dir
    assert "privileged" not in portal
