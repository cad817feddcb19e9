"""What the local backend's sandbox costs a task start (issue 18 aims under 50 ms).

Its figures, each the median of ``RUNS`` runs (a task whose script is ``true``):

- the task's command alone (``subprocess.run`` of what the wrapper execs): ``/bin/sh
  bootstrap.sh`` unsandboxed against the sandbox's prelude (cgroups, as root the mount gates),
  ``setpriv`` and ``bwrap``;
- the task firewall's one nftables transaction per start (as root with nftables);
- the whole launch, from ``LocalBackend.launch`` to its ``exit_code`` file, unsandboxed
  (``SandboxConfig(enabled=False)``) and sandboxed: the wrapper's own steps are in both; and,
  where Charliecloud is installed, sandboxed in a cached busybox image (``LOCAL_IMAGES``).

Prints the figures, the headline (the sandbox's cost per start) last.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backends.base import Placement, TaskLaunch  # noqa: E402
from backends.local import LocalBackend, launch, sandbox  # noqa: E402, I001
from backends.local.firewall import (  # noqa: E402
    FirewallConfig,
    TaskFirewall,
    unavailable_reason,
)
from backends.local.sandbox import SandboxConfig  # noqa: E402
from tests.support.images import IMAGE, build_busybox_image  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "20"))


def task(index: int, image: str = "") -> TaskLaunch:
    return TaskLaunch(
        f"bench-{index}", "worker", 0, 0, "true\n", {}, Placement("127.0.0.1", {}), 1, 256, 0, image
    )


def launch_to_exit(backend: LocalBackend, index: int, image: str = "") -> float:
    start = time.perf_counter()
    ref = backend.launch(task(index, image))
    exit_code = backend.root / ref / "exit_code"
    while not exit_code.exists():
        time.sleep(0.001)
    return time.perf_counter() - start


def command_alone(backend: LocalBackend, index: int) -> float:
    """The task's command as the wrapper runs it, timed on its own."""
    ref = backend.launch(task(index))
    control = backend.root / ref
    while not (control / "exit_code").exists():
        time.sleep(0.001)
    command = ["/bin/sh", "./bootstrap.sh"]
    if backend.sandbox.enabled:
        t = task(index)
        identity = _identity(backend, control)
        command = launch.sandbox_command(
            backend.sandbox, backend.task_path, backend.root, t, ref, None, identity,
            backend.hierarchy,
        )  # fmt: skip
    start = time.perf_counter()
    subprocess.run(command, cwd=control, env={"PATH": "/usr/bin:/bin"}, check=True)  # noqa: S603
    return time.perf_counter() - start


def _identity(backend: LocalBackend, control: Path) -> sandbox.TaskIdentity | None:
    return sandbox.identity_for(backend.sandbox, None, control / "work")  # as launch() did


def firewall_ms() -> str:
    """What the task firewall adds to a task start, as root with nftables: a launch adds its task's
    ports to the table's set (``TaskFirewall.open``, one small transaction), median of ``RUNS``
    with 200 ports open; beside it, bringing the whole table up to date (a backend's first launch
    and each cleanup). Else why it is not set."""
    config = FirewallConfig(table=f"portal_bench_{os.getpid()}")
    if (reason := unavailable_reason(config)) is not None:
        return f"not set here ({reason})"
    table = TaskFirewall(config)
    opened, rebuilt = [], []
    try:
        for run in range(RUNS):
            start = time.perf_counter()
            table.sync(range(30000 + run, 30200 + run), tasks_running=True)
            rebuilt.append(time.perf_counter() - start)
            start = time.perf_counter()
            table.open({31000 + run, 32000 + run}, set)
            opened.append(time.perf_counter() - start)
    finally:
        table.sync([], tasks_running=False)
    return (
        f"{median_ms(opened):.2f} ms (one transaction adding its ports, median of {RUNS}; "
        f"the whole table brought up to date: {median_ms(rebuilt):.1f} ms)"
    )


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def main() -> None:
    with tempfile.TemporaryDirectory(dir="/var/tmp") as top:  # noqa: S108
        plain = LocalBackend(Path(top) / "plain", sandbox_config=SandboxConfig(enabled=False))
        boxed = LocalBackend(Path(top) / "boxed")
        print(f"limits on this host: {'; '.join(boxed.describe_limits())}")
        figures = {}
        for name, backend in (("unsandboxed", plain), ("sandboxed", boxed)):
            figures[f"command, {name}"] = median_ms(
                [command_alone(backend, i) for i in range(RUNS)]
            )
            figures[f"launch to exit code, {name}"] = median_ms(
                [launch_to_exit(backend, RUNS + i) for i in range(RUNS)]
            )
        # The working directory's own file system (mkfs.ext4 and a loop mount, as root).
        no_disk = LocalBackend(Path(top) / "nodisk", sandbox_config=SandboxConfig(disk_mb=0))
        figures["launch to exit code, sandboxed, no disk limit"] = median_ms(
            [launch_to_exit(no_disk, 3 * RUNS + i) for i in range(RUNS)]
        )
        if shutil.which("ch-image") and shutil.which("ch-run"):
            storage = Path(top) / "images"
            old = os.umask(0o022)
            build_busybox_image(storage, IMAGE)
            os.umask(old)
            config = SandboxConfig(images="charliecloud", image_storage=storage)
            in_image = LocalBackend(Path(top) / "image", sandbox_config=config)
            figures["launch to exit code, sandboxed in an image"] = median_ms(
                [launch_to_exit(in_image, 2 * RUNS + i, IMAGE) for i in range(RUNS)]
            )
        for backend in (plain, boxed, no_disk, *([in_image] if "in_image" in locals() else [])):
            backend.cleanup([])  # their cgroups and gates (every task has ended)
        for name, value in figures.items():
            print(f"{name}: {value:.1f} ms (median of {RUNS})")
        disk_cost = (
            figures["launch to exit code, sandboxed"]
            - figures["launch to exit code, sandboxed, no disk limit"]
        )
        print(f"the disk limit (a file system per working directory) costs {disk_cost:.1f} ms")
        print(f"the task firewall costs a task start {firewall_ms()}")
        cost = figures["command, sandboxed"] - figures["command, unsandboxed"]
        print(f"the sandbox costs a task start {cost:.1f} ms (as uid {os.geteuid()})")


if __name__ == "__main__":
    main()
