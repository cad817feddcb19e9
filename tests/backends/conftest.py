"""Fixtures of the local backend's tests: a backend under the test's own directory (a machine
with two fake GPUs is ``two_gpus``, in tests/conftest.py: the runtime's tests use it too)."""

from __future__ import annotations

from pathlib import Path

import pytest

from backends.local import LocalBackend


@pytest.fixture
def backend(tmp_path: Path) -> LocalBackend:
    return LocalBackend(tmp_path / "tasks")
