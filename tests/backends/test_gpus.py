"""GPUs by CUDA's rules on the local backend (``backends/local/gpus.py``): a fake
``nvidia-smi`` (``two_gpus``) and a fake driver whose minor numbers are not nvidia-smi's indices,
real sandboxed tasks that look at their /dev, their environment and their /proc/driver."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from backends.base import TaskPhase
from backends.local import LocalBackend
from backends.local import gpus as gpus_module
from backends.local.gpus import GPU, detect, environment
from backends.local.sandbox import SandboxConfig
from tests.support.local_tasks import task, wait_until_ended
from tests.waiting import wait_for

UUIDS = ["GPU-0a1b2c3d-0000-4000-8000-000000000001", "GPU-0a1b2c3d-0000-4000-8000-000000000002"]
# nvidia-smi's index 0 is the driver's minor 1 (/dev/nvidia1) and index 1 its minor 0: the
# driver numbers the cards in the order it probed them, nvidia-smi by PCI bus id.
FIRST = GPU(0, "Tesla T4", UUIDS[0], "0000:3b:00.0", minor=1)
SECOND = GPU(1, "Tesla T4", UUIDS[1], "0000:af:00.0", minor=0)
NVIDIA_MAJOR, UVM_MAJOR, CAPS_MAJOR = 195, 235, 238
# The driver lists every MIG capability a GPU could have; the nodes exist for the instances
# made (here on the GPU of minor 0 only: it is in MIG mode); config and monitor are global.
MIG_MINORS = {"config": 1, "monitor": 2, "gpu0/gi1/access": 12, "gpu0/gi1/ci0/access": 13}
MIG_MINORS |= {"gpu1/gi1/access": 21, "gpu1/gi1/ci0/access": 22}
MADE_CAPS = (1, 2, 12, 13)


def make_node(path: Path, major: int, minor: int) -> None:
    """A character device (as root: what the driver makes), else a file in its place."""
    if os.geteuid() == 0:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    else:
        path.write_text(f"{major}:{minor}")
        path.chmod(0o644)


@pytest.fixture
def fake_driver(two_gpus: list[str]) -> Iterator[SandboxConfig]:
    """The driver's files (``/proc/driver``) and device nodes (``/dev``) of ``two_gpus``' GPUs,
    where any uid may pass: a sandbox's config that takes them for the machine's."""
    top = Path(tempfile.mkdtemp(prefix="fake-gpus-", dir="/var/tmp"))  # noqa: S108
    try:
        proc, dev = top / "driver", top / "dev"
        for gpu in (FIRST, SECOND):
            info = proc / "nvidia" / "gpus" / gpu.bus_id / "information"
            info.parent.mkdir(parents=True)
            info.write_text(
                f"Model: \t\t Tesla T4\nGPU UUID: \t {gpu.uuid}\nBus Location: \t {gpu.bus_id}\n"
                f"Device Minor: \t {gpu.minor}\nGPU Excluded:\t No\n"
            )
            mig = proc / "nvidia" / "capabilities" / f"gpu{gpu.minor}" / "mig"
            mig.mkdir(parents=True)
        (proc / "nvidia" / "capabilities" / "gpu0" / "mig" / "gi1").mkdir()
        (proc / "nvidia" / "version").write_text("NVRM version: fake 1.0\n")
        (proc / "nvidia-caps").mkdir()
        lines = [f"{path} {minor}\n" for path, minor in MIG_MINORS.items()]
        (proc / "nvidia-caps" / "mig-minors").write_text("".join(lines))
        (proc / "rtc").write_text("another driver's entry\n")
        (dev / "nvidia-caps").mkdir(parents=True)
        for gpu in (FIRST, SECOND):
            make_node(dev / f"nvidia{gpu.minor}", NVIDIA_MAJOR, gpu.minor)
        make_node(dev / "nvidiactl", NVIDIA_MAJOR, 255)
        make_node(dev / "nvidia-uvm", UVM_MAJOR, 0)
        make_node(dev / "nvidia-modeset", NVIDIA_MAJOR, 254)  # not one a CUDA program needs
        for minor in MADE_CAPS:
            make_node(dev / "nvidia-caps" / f"nvidia-cap{minor}", CAPS_MAJOR, minor)
        for path in (top, *top.rglob("*")):
            if path.is_dir():
                path.chmod(0o755)
        yield SandboxConfig(dev_dir=dev, proc_driver=proc)
    finally:
        shutil.rmtree(top)


def test_each_gpu_is_named_by_the_drivers_minor_number(fake_driver: SandboxConfig):
    assert detect(fake_driver.proc_driver) == [FIRST, SECOND]


def test_without_the_drivers_files_a_gpus_minor_number_is_its_index(
    two_gpus: list[str], tmp_path: Path
):
    found = detect(tmp_path / "no-driver")
    assert [(gpu.index, gpu.minor, gpu.bus_id) for gpu in found] == [
        (0, 0, "0000:3b:00.0"),
        (1, 1, "0000:af:00.0"),
    ]


def test_cuda_numbers_a_sandboxed_tasks_gpus_from_0_and_an_unsandboxed_tasks_by_uuid():
    both = [SECOND, FIRST]  # CUDA_DEVICE_ORDER=PCI_BUS_ID: FIRST's bus comes first
    assert environment(both, sandboxed=True) == {
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "NVIDIA_VISIBLE_DEVICES": "0,1",
    }
    assert environment([SECOND], sandboxed=False)["CUDA_VISIBLE_DEVICES"] == UUIDS[1]
    assert environment(both, sandboxed=False)["CUDA_VISIBLE_DEVICES"] == ",".join(UUIDS)
    assert environment([], sandboxed=True) == {
        "CUDA_VISIBLE_DEVICES": "",
        "NVIDIA_VISIBLE_DEVICES": "void",
    }
    assert environment(None, sandboxed=True) == {}  # a machine without GPUs


def test_without_the_drivers_files_the_sandbox_leaves_proc_as_it_is(tmp_path: Path):
    args = gpus_module.bwrap_args([FIRST], tmp_path, tmp_path / "no-driver")
    assert args == []  # no node in the (empty) dev dir and no /proc/driver/nvidia


# What a task prints of the GPUs it sees: its device nodes, its GPU variables, its driver's
# GPUs and MIG capabilities, the other entries of /proc/driver, then it waits (so that the
# backend hands the next task another GPU) until the test lets it end.
LOOK = """\
echo "nodes: $(cd /dev && ls -d nvidia* nvidia-caps/* 2>/dev/null | sort | tr '\\n' ' ')"
echo "env: [$CUDA_VISIBLE_DEVICES] [$NVIDIA_VISIBLE_DEVICES] [$CUDA_DEVICE_ORDER]"
echo "gpus: $(ls /proc/driver/nvidia/gpus | tr '\\n' ' ')"
echo "minors: $(cat /proc/driver/nvidia/gpus/*/information 2>/dev/null | grep -c Minor)"
echo "caps: $(ls /proc/driver/nvidia/capabilities | tr '\\n' ' ')"
echo "driver: $(ls /proc/driver | tr '\\n' ' ') $(cat /proc/driver/nvidia/version)"
while [ ! -e go ]; do sleep 0.05; done
"""


def seen(backend: LocalBackend, ref: str) -> dict[str, list[str]]:
    """What the task printed (``LOOK``), each line's words by its label."""
    wait_for(lambda: backend.read_log(ref, "stdout").count(b"\n") >= 6)
    lines = backend.read_log(ref, "stdout").decode().splitlines()
    return {label: rest.split() for label, _, rest in (line.partition(": ") for line in lines)}


def end(backend: LocalBackend, refs: list[str]) -> None:
    for ref in refs:
        (backend.work_dir(ref) / "go").touch()
        assert wait_until_ended(backend, ref) == TaskPhase.SUCCEEDED


def test_a_task_sees_exactly_its_own_gpus_as_cuda_numbers_them(
    tmp_path: Path, fake_driver: SandboxConfig
):
    backend = LocalBackend(tmp_path / "tasks", sandbox_config=fake_driver)
    first = backend.launch(task(LOOK, gpu=1))
    second = backend.launch(task(LOOK, gpu=1, index=1))
    cpu_only = backend.launch(task(LOOK, gpu=0, index=2))
    looks = {ref: seen(backend, ref) for ref in (first, second, cpu_only)}
    end(backend, [first, second, cpu_only])
    assert looks[first] == {
        "nodes": ["nvidia-uvm", "nvidia1", "nvidiactl"],  # index 0 is the driver's minor 1
        "env": ["[0]", "[0]", "[PCI_BUS_ID]"],
        "gpus": [FIRST.bus_id],
        "minors": ["1"],
        "caps": ["gpu1"],
        "driver": ["nvidia", "nvidia-caps", "rtc", "NVRM", "version:", "fake", "1.0"],
    }
    assert looks[second] == {  # in MIG mode: its instances' capability nodes come with it
        "nodes": ["nvidia-caps", "nvidia-caps/nvidia-cap12", "nvidia-caps/nvidia-cap13"]
        + ["nvidia-uvm", "nvidia0", "nvidiactl"],
        "env": ["[0]", "[1]", "[PCI_BUS_ID]"],
        "gpus": [SECOND.bus_id],
        "minors": ["1"],
        "caps": ["gpu0"],
        "driver": looks[first]["driver"],
    }
    assert looks[cpu_only] == {
        "nodes": [],
        "env": ["[]", "[void]", "[]"],
        "gpus": [],
        "minors": ["0"],
        "caps": [],
        "driver": looks[first]["driver"],
    }
    both = backend.launch(task(LOOK, gpu=2, index=3))  # the GPUs are free again
    look = seen(backend, both)
    end(backend, [both])
    assert look["nodes"] == [
        *("nvidia-caps", "nvidia-caps/nvidia-cap12", "nvidia-caps/nvidia-cap13"),
        *("nvidia-uvm", "nvidia0", "nvidia1", "nvidiactl"),
    ]
    assert look["env"] == ["[0,1]", "[0,1]", "[PCI_BUS_ID]"]
    assert look["gpus"] == [FIRST.bus_id, SECOND.bus_id]
    assert (look["minors"], look["caps"]) == (["2"], ["gpu0", "gpu1"])
