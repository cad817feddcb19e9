"""The sandbox's tests again on a real cgroup-v2 host: a Debian 12 VM (``tests/support/vm.py``)
with its own PostgreSQL (trusting local connections) and Redis, as a user's host has them, the
tests run inside as root. This machine mounts cgroup v1, so only here do the v2 limits meet the
kernel. Inside, ``PORTAL_EXPECT_CGROUP=2`` tells the tests that v2 limits must be in force.

Skipped only where QEMU (or, with no cached image, mmdebstrap) cannot run, and never in CI."""

from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path

import pytest

from tests.support import vm

ROOT = Path(__file__).resolve().parents[2]
# What runs inside the VM: the sandbox, the hostile job, the limits, the attacks, the network.
MODULES = (
    "tests/backends/test_sandbox.py",
    "tests/runtime/test_sandbox_escapes.py",
    "tests/backends/test_limits.py",
    "tests/backends/test_local_usage.py",  # a task's CPU and memory from its v2 cgroup
    "tests/runtime/test_one_job_cannot_take_the_machine_down.py",
    "tests/backends/test_firewall.py",
    "tests/compose/test_sandbox_host.py",  # the compose entrypoint, on a container's cgroup v2
)
TIMEOUT = 900  # seconds for the tests inside (about 470 s here); the boot comes on top

INSIDE = """\
set -eu
kind=$(stat -fc %T /sys/fs/cgroup)
if [ "$kind" != cgroup2fs ]; then
  echo "not a cgroup-v2 host: /sys/fs/cgroup is $kind, not cgroup2fs"
  exit 3
fi
echo "cgroup v2, controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
export PORTAL_EXPECT_CGROUP=2 CI=true PYTHONDONTWRITEBYTECODE=1 HOME=/root LANG=C.UTF-8
export DATABASE_URL=postgres://postgres@127.0.0.1:5432/vm REDIS_URL=redis://127.0.0.1:6379/9
cd {root}
exec {python} -m pytest -p no:cacheprovider -v -ra --durations=25 --color=no {modules}
"""


def skip_unless_runnable() -> None:
    """Skip on a developer's machine without QEMU (or the tools to build the image); fail in
    CI, where ``make vm-tools`` installs them. The VM runs this virtualenv, whose interpreter
    must be Debian's /usr/bin/python3 (the Makefile's choice where it is 3.11, as on CI)."""
    missing = vm.missing_tools(building=vm.cached_image() is None)
    if sys.base_prefix != "/usr" or sys.version_info[:2] != (3, 11):
        missing.append(
            f"a virtualenv of Debian 12's /usr/bin/python3 (this one: {sys.base_prefix})"
        )
    if not missing:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"the cgroup-v2 VM cannot run in CI: missing {', '.join(missing)}")
    pytest.skip(f"the cgroup-v2 VM cannot run here: missing {', '.join(missing)}")


def shares() -> list[vm.Share]:
    """The tree under test and, when it lives elsewhere, the virtualenv."""
    found = [vm.Share(ROOT)]
    if not Path(sys.prefix).resolve().is_relative_to(ROOT):
        found.append(vm.Share(Path(sys.prefix).resolve(), writable=False))
    return found


def summary(output: str) -> dict[str, int]:
    """pytest's last line, ``3 passed, 1 skipped in 9.1s``, as counts by outcome."""
    lines = [line for line in output.splitlines() if re.search(r"\bin [\d.]+s\b", line)]
    found = re.findall(r"(\d+) (passed|failed|errors?|skipped)", lines[-1] if lines else "")
    return {("error" if kind.startswith("error") else kind): int(n) for n, kind in found}


@pytest.mark.vm
def test_the_sandbox_tests_pass_on_a_cgroup_v2_host(tmp_path: Path):
    skip_unless_runnable()
    script = INSIDE.format(
        root=shlex.quote(str(ROOT)),
        python=shlex.quote(sys.executable),
        modules=" ".join(shlex.quote(m) for m in MODULES),
    )
    run = vm.run_in_vm(script, shares(), timeout=TIMEOUT, console_log=tmp_path / "console.log")
    print(
        f"the tests started at {run.booted_seconds}s of the VM's uptime; {run.seconds:.0f}s in all"
    )
    counts = summary(run.output)
    report = f"{run.output}\n--- console (last lines):\n{vm.tail(run.console)}"
    assert run.exit_code == 0, report
    assert counts.get("passed", 0) > 0, report
    assert not counts.get("failed") and not counts.get("error"), report
