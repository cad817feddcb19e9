"""docker-compose.yml: every long-running service starts again by itself when it exits."""

from __future__ import annotations

from pathlib import Path

import yaml

COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.yml"


def test_every_long_running_service_restarts_and_the_portal_ones_have_a_healthcheck():
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    one_shots = {"migrate"}
    for name, service in services.items():
        if name not in one_shots:
            assert service.get("restart") in ("unless-stopped", "always", "on-failure"), name
    for name in ("postgres", "redis", "web", "worker"):
        assert services[name]["healthcheck"]["test"], name


def test_the_watcher_runs_beside_the_worker_on_the_shared_volume():
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    watcher, worker = services["watcher"], services["worker"]
    assert watcher["command"][-1] == "watchcluster"
    assert watcher["volumes"] == worker["volumes"]  # the tasks' root, where wrappers leave files
