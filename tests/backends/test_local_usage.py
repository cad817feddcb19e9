"""What a running local task uses (``LocalBackend.usage``), as OpenPAI's job exporter reported
each task's CPU, memory, GPU utilisation and GPU memory (``task_cpu_percent``,
``task_mem_usage_byte``, ``task_gpu_percent``, ``task_gpu_mem_percent``; its docs'
alert-manager.md): a sandboxed task read from its own cgroup (v1 here, v2 in the VM of
``tests/vm``), an unsandboxed one from its processes, its GPUs from nvidia-smi."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from backends.base import SupportsUsage, TaskPhase, Usage
from backends.local import LocalBackend
from backends.local.sandbox import SandboxConfig
from tests.support.local_tasks import launch, task, wait_until_ended
from tests.waiting import wait_for

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="a task's cgroup needs root")
MB = 1024 * 1024
# Holds 120 MB (written, so resident) and keeps one core busy for a minute.
BURNER = """python3 -c 'import time
b = b"x" * (120 * 1024 * 1024)
print("holding", flush=True)
t = time.time()
while time.time() - t < 60:
    pass'"""


def reading(backend: LocalBackend, ref: str) -> Usage:
    return backend.usage([ref])[ref]


def cpu_rate(backend: LocalBackend, ref: str, seconds: float = 1.0) -> float:
    """Cores the task used over ``seconds``, from two readings of its CPU time."""
    first = reading(backend, ref).cpu_seconds
    time.sleep(seconds)
    second = reading(backend, ref).cpu_seconds
    assert first is not None and second is not None
    return (second - first) / seconds


def holding(backend: LocalBackend, ref: str) -> bool:
    return b"holding" in backend.read_log(ref, "stdout")


@as_root
def test_a_sandboxed_tasks_cpu_and_memory_come_from_its_cgroup_as_openpais_task_metrics(
    tmp_path: Path,
):
    backend = LocalBackend(tmp_path / "tasks")
    assert isinstance(backend, SupportsUsage)
    ref = backend.launch(task(BURNER))  # memoryMB 256, cpu 1: in its cgroup
    try:
        wait_for(lambda: holding(backend, ref), timeout=30)
        usage = reading(backend, ref)
        assert usage.memory_bytes is not None
        assert 110 * MB <= usage.memory_bytes <= 256 * MB, usage
        assert 0.6 <= cpu_rate(backend, ref) <= 1.2  # one core, at most its cpu limit
        assert usage.gpu_util is None and usage.gpu_memory_bytes is None  # no GPU
    finally:
        backend.stop([ref])
    assert wait_until_ended(backend, ref, timeout=30) == TaskPhase.FAILED
    assert backend.usage([ref, "job-9-a1/unknown-0", "not a ref"]) == {}  # only running tasks


def test_an_unsandboxed_tasks_usage_is_summed_over_its_processes(tmp_path: Path):
    backend = LocalBackend(tmp_path / "tasks", sandbox_config=SandboxConfig(enabled=False))
    ref = launch(backend, BURNER)
    try:
        wait_for(lambda: holding(backend, ref), timeout=30)
        usage = reading(backend, ref)
        assert usage.memory_bytes is not None and usage.memory_bytes >= 110 * MB, usage
        assert cpu_rate(backend, ref) >= 0.6
    finally:
        backend.stop([ref])


@pytest.fixture
def busy_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake nvidia-smi with two GPUs: GPU 0 at 87% with 3000 MiB in use, GPU 1 idle."""
    bin_dir = tmp_path / "gpubin"
    bin_dir.mkdir()
    fake = bin_dir / "nvidia-smi"
    fake.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        "  --query-gpu=index,utilization.gpu,memory.used) printf '0, 87, 3000\\n1, 0, 2\\n';;\n"
        "  *) printf '0, Tesla T4, GPU-a, 00000000:3B:00.0\\n1, Tesla T4, GPU-b, "
        "00000000:AF:00.0\\n';;\n"
        "esac\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")


def test_a_tasks_gpu_utilisation_and_memory_are_those_of_its_own_gpus(
    tmp_path: Path, busy_gpus: None
):
    backend = LocalBackend(tmp_path / "tasks", sandbox_config=SandboxConfig(enabled=False))
    with_gpu = launch(backend, "sleep 30", gpu=1)  # given GPU 0, the first free one
    without = launch(backend, "sleep 30", index=1)
    try:
        usage = backend.usage([with_gpu, without])
        assert usage[with_gpu].gpu_util == 87.0
        assert usage[with_gpu].gpu_memory_bytes == 3000 * MB
        assert usage[without].gpu_util is None and usage[without].gpu_memory_bytes is None
    finally:
        backend.stop([with_gpu, without])
