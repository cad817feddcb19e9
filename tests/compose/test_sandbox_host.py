"""The compose entrypoint (``deploy/compose/sandbox-host``) on cgroup v2, the hierarchy of every
current distribution: Docker gives a container there a private cgroup namespace rooted at its
own cgroup and mounts it read-only. The same is made here with ``unshare`` (a cgroup of the
test's, a cgroup and a mount namespace, cgroup2 mounted read-only) and the entrypoint must turn
it into a place where every task limit can be set. The Docker engine on this machine runs on
cgroup v1 (``test_stack.py`` covers that branch); this runs inside the cgroup-v2 VM
(``tests/vm``), and is skipped on a cgroup-v1 host unless ``PORTAL_EXPECT_CGROUP=2``."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CGROUP = Path("/sys/fs/cgroup")

LIMITS = """\
import sys
sys.path.insert(0, ".")
from backends.local import cgroups
hierarchy = cgroups.detect()
print(hierarchy.describe())
if hierarchy.controllers:
    procs = cgroups.create(hierarchy, "job1-a0/main-0", cgroups.Limits(memory_mb=64, cpu=1))
    print("memory.max", (procs[0].parent / "memory.max").read_text().strip())
    cgroups.remove(hierarchy, "job1-a0/main-0")
"""


@pytest.fixture
def container_cgroup() -> Iterator[Path]:
    if (CGROUP / "cgroup.controllers").is_file() and os.geteuid() == 0:
        pass
    elif os.environ.get("PORTAL_EXPECT_CGROUP") == "2":
        pytest.fail("this host was to have cgroup v2 and root")
    else:
        pytest.skip("needs root on a cgroup-v2 host (tests/vm runs it in one)")
    # Docker hands its containers these controllers (their --memory, --cpus, --pids-limit).
    for controller in ("memory", "cpu", "pids"):
        (CGROUP / "cgroup.subtree_control").write_text(f"+{controller}")
    path = CGROUP / f"portal-test-container-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    yield path
    for leaf in sorted(path.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if leaf.is_dir():
            leaf.rmdir()
    path.rmdir()


def in_container(cgroup: Path, entrypoint: bool, tmp_path: Path) -> str:
    """LIMITS run as in a Docker container of ``cgroup``: a private cgroup namespace with
    cgroup2 mounted read-only, through the compose entrypoint or not."""
    (tmp_path / "limits.py").write_text(LIMITS)
    command = f"{sys.executable} {tmp_path / 'limits.py'}"
    if entrypoint:
        command = f"deploy/compose/sandbox-host {command}"
    inside = "umount /sys/fs/cgroup && mount -t cgroup2 -o ro cgroup2 /sys/fs/cgroup && " + command
    script = (
        f'echo $$ > {cgroup}/cgroup.procs && exec unshare --cgroup --mount --fork sh -c "{inside}"'
    )
    done = subprocess.run(
        ["sh", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    return f"exit {done.returncode}\n{done.stdout}{done.stderr}"


def test_the_entrypoint_makes_a_read_only_private_cgroup_v2_hold_every_limit(
    container_cgroup, tmp_path
):
    with_it = in_container(container_cgroup, entrypoint=True, tmp_path=tmp_path)
    assert with_it.startswith("exit 0"), with_it
    assert "cgroup v2: memory, cpu, pids limited per task" in with_it, with_it
    assert "NOT" not in with_it, with_it
    assert f"memory.max {64 * 1024 * 1024}" in with_it, with_it
    # The processes of the container's root moved to a leaf: its controllers could be handed on.
    assert (container_cgroup / "portal" / "cgroup.procs").exists()


def test_without_the_entrypoint_no_limit_can_be_set_there(container_cgroup, tmp_path):
    without = in_container(container_cgroup, entrypoint=False, tmp_path=tmp_path)
    assert "memory.max" not in without, without
    assert "limited per task" not in without or "NOT" in without, without
