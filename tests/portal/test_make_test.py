"""``make test`` runs the tests on a Redis database of their own."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_make_test_gives_the_tests_redis_database_9_unless_told_otherwise():
    env = {k: v for k, v in os.environ.items() if k not in ("TEST_REDIS_URL", "MAKEFLAGS")}
    dry = subprocess.run(
        ["make", "-n", "test"], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    pytest_line = next(line for line in dry.stdout.splitlines() if "-m pytest" in line)
    assert pytest_line.startswith("REDIS_URL=redis://127.0.0.1:6379/9 ")
    elsewhere = {**env, "TEST_REDIS_URL": "redis://cache.example:6379/3"}
    dry = subprocess.run(
        ["make", "-n", "test"], cwd=ROOT, env=elsewhere, capture_output=True, text=True, check=True
    )
    assert "REDIS_URL=redis://cache.example:6379/3 " in dry.stdout
