"""Fixtures of the local backend's tests: a backend under the test's own directory, and a
machine with two (fake) GPUs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clusters.backends.local import LocalBackend


@pytest.fixture
def backend(tmp_path: Path) -> LocalBackend:
    return LocalBackend(tmp_path / "tasks")


@pytest.fixture
def two_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake ``nvidia-smi`` on PATH that reports two GPUs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "nvidia-smi"
    fake.write_text("#!/bin/sh\nprintf '0, Tesla T4\\n1, Tesla T4\\n'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
