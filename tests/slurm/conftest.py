"""``slurm_cluster``: a real Slurm cluster in Docker (tests/support/slurm_cluster.py), started
once per test session, with this host as its submit host.

Skipped only where no Docker engine or Slurm client can run here (``make docker slurm-client``
installs them), never in CI, as tests/compose does."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from tests.support.slurm_cluster import SlurmCluster, missing_tools, start, stop_cluster


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    if missing := missing_tools():
        if os.environ.get("CI") == "true":
            pytest.fail(f"the Slurm cluster cannot run in CI: missing {', '.join(missing)}")
        pytest.skip(f"the Slurm cluster cannot run here: missing {', '.join(missing)}")
    started = time.monotonic()
    cluster = start()
    print(f"Slurm cluster of TEST_SLOT={cluster.slot} up in {time.monotonic() - started:.1f} s")
    try:
        yield cluster
    finally:
        stop_cluster(cluster)
