"""A task given 1 GPU, in the local backend's sandbox on a machine with an NVIDIA GPU: what
``nvidia-smi -L`` and CUDA (libcuda's ``cuInit`` and ``cuDeviceGetCount``, through ctypes: no
torch) show inside, beside the same outside, and what a task given no GPU sees.

Not one of ``make bench``'s (its name starts with ``_``): it needs a GPU, and is run by hand
as root, with no network needed, from the repository (python 3.11 or later, no package: the
local backend imports the standard library only)::

    python3 bench/_gpu_sandbox_check.py

``LOCAL_SANDBOX_BWRAP``: the bwrap binary to use (as the portal's setting; default ``bwrap`` on
PATH), e.g. one carried from another machine. It is copied where the task's uid may run it;
``BWRAP_LIBRARY_PATH``: a directory of the shared libraries it lacks on this machine
(``ldd $(which bwrap)``: libselinux.so.1, libcap.so.2, libpcre2-8.so.0 on Debian 12), used by
a small wrapper in its place. Exit status 0 when the task sees exactly its GPU (one CUDA device,
nvidia-smi lists it alone, by the host's UUID) and the task without GPUs sees none.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backends.base import Placement, TaskLaunch, TaskPhase  # noqa: E402
from backends.local import LocalBackend, gpus  # noqa: E402
from backends.local.sandbox import SYSTEM_PATH, SandboxConfig  # noqa: E402

# Counts the CUDA devices this process may use and names each (argv[1]: libcuda's path).
CUDA_COUNT = r"""
import ctypes, sys
cuda = ctypes.CDLL(sys.argv[1])
def check(what, code):
    if code:
        name = ctypes.c_char_p()
        cuda.cuGetErrorName(code, ctypes.byref(name))
        print(f"{what}: error {code} ({(name.value or b'?').decode()})")
        print("CUDA device count: 0")
        sys.exit(0)
check("cuInit", cuda.cuInit(0))
count = ctypes.c_int()
check("cuDeviceGetCount", cuda.cuDeviceGetCount(ctypes.byref(count)))
print("CUDA device count:", count.value)
for number in range(count.value):
    device = ctypes.c_int()
    check("cuDeviceGet", cuda.cuDeviceGet(ctypes.byref(device), number))
    name, bus = ctypes.create_string_buffer(256), ctypes.create_string_buffer(64)
    uuid = (ctypes.c_ubyte * 16)()
    cuda.cuDeviceGetName(name, 256, device)
    cuda.cuDeviceGetPCIBusId(bus, 64, device)
    cuda.cuDeviceGetUuid(uuid, device)
    h = bytes(uuid).hex()
    print(f"CUDA device {number}: {name.value.decode()}, bus {bus.value.decode()},"
          f" GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
"""

# What a task prints of its GPUs.
LOOK = """\
echo "uid $(id -u); $(env | grep -E '^(CUDA|NVIDIA)_' | sort | tr '\\n' ' ')"
echo "device nodes:"; ls -l /dev | grep -i nvidia; ls -l /dev/nvidia-caps 2>/dev/null
echo "/proc/driver: $(ls /proc/driver | tr '\\n' ' ')"
echo "/proc/driver/nvidia/gpus: $(ls /proc/driver/nvidia/gpus 2>&1 | tr '\\n' ' ')"
echo "nvidia-smi -L:"; "$NVIDIA_SMI" -L 2>&1
"$PYTHON" -I -S cuda_count.py "$LIBCUDA" 2>&1
"""


def section(title: str) -> None:
    print(f"\n== {title}", flush=True)


def sh(command: str) -> str:
    done = subprocess.run(command, shell=True, capture_output=True, text=True, check=False)  # noqa: S602
    return (done.stdout + done.stderr).strip()


def libcuda() -> str:
    """The path of the libcuda.so.1 this machine loads (the driver installs it)."""
    probe = "import ctypes; ctypes.CDLL('libcuda.so.1'); print(open('/proc/self/maps').read())"
    maps = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout
    found = re.search(r"(/\S*libcuda\.so[.\d]*)\s*$", maps, re.MULTILINE)
    if not found:
        sys.exit("libcuda.so.1 is not loadable here: no NVIDIA driver?")
    return found.group(1)


def passable_bwrap(top: Path) -> str:
    """bwrap where the task's uid may run it (a carried one may sit under /root)."""
    given = os.environ.get("LOCAL_SANDBOX_BWRAP", "bwrap")
    binary = shutil.which(given)
    if binary is None:
        sys.exit(f"no bwrap at {given!r}: set LOCAL_SANDBOX_BWRAP to a bwrap binary")
    tools = top / "bin"
    tools.mkdir(mode=0o755)
    shutil.copy(binary, tools / "bwrap.bin")
    libs = os.environ.get("BWRAP_LIBRARY_PATH")
    if libs:
        shutil.copytree(libs, tools / "lib")
        (tools / "bwrap").write_text(
            f'#!/bin/sh\nLD_LIBRARY_PATH={tools / "lib"} exec {tools / "bwrap.bin"} "$@"\n'
        )
    else:
        (tools / "bwrap.bin").rename(tools / "bwrap")
    for path in (tools, *tools.rglob("*")):
        path.chmod(0o755)
    version = sh(f"{tools / 'bwrap'} --version")
    print(f"bwrap: {binary} -> {tools / 'bwrap'}: {version}")
    if not version.startswith("bubblewrap"):
        print(sh(f"ldd {binary}"))
        sys.exit("this bwrap does not run here (missing libraries? see BWRAP_LIBRARY_PATH)")
    return str(tools / "bwrap")


def runnable_by_others(path: str) -> bool:
    """Whether another uid (the task's) may run ``path``: o+x on it and each directory above."""
    real = Path(path).resolve()
    try:
        return all(p.stat().st_mode & 0o001 for p in (real, *real.parents))
    except OSError:
        return False


def task_python() -> str:
    """A python3 the task's uid may run (this one may live under /root, as pyenv's does)."""
    candidates = [sys.executable, shutil.which("python3", path=SYSTEM_PATH), "/usr/bin/python3"]
    for candidate in candidates:
        if candidate and runnable_by_others(candidate):
            return str(Path(candidate).resolve())  # the interpreter, not a venv's link
    sys.exit(f"no python3 that another uid may run among {candidates}")


def task(index: int, gpu: int, env: dict[str, str]) -> TaskLaunch:
    return TaskLaunch(
        attempt_key="gpu-check-a1",
        role="worker",
        index=index,
        retry=0,
        script=LOOK,
        env=env,
        placement=Placement("127.0.0.1", {}),
        cpu=1,
        memory_mb=0,  # CUDA reserves far more address space than it uses: no RLIMIT_AS
        gpu=gpu,
        files={"cuda_count.py": CUDA_COUNT},
        owner_id=1,
    )


def run_task(backend: LocalBackend, launch: TaskLaunch) -> str:
    ref = backend.launch(launch)
    deadline = time.monotonic() + 180
    while (phase := backend.observe([ref])[ref]).phase not in (
        TaskPhase.SUCCEEDED,
        TaskPhase.FAILED,
    ):
        if time.monotonic() > deadline:
            backend.stop([ref])
            break
        time.sleep(0.2)
    record = (backend.root / ref / "task.json").read_text()
    sandboxed = '"sandboxed": true' in record
    print(f"phase {phase.phase}, sandboxed {sandboxed} {phase.diagnostics or ''}".rstrip())
    out = backend.read_log(ref, "stdout").decode(errors="replace")
    print(out + backend.read_log(ref, "stderr").decode(errors="replace"))
    return out if sandboxed else ""


def main() -> int:
    if os.geteuid() != 0:
        print("note: not root, the task runs as this user (no uid of its own, no cgroups)")
    cuda = libcuda()
    nvidia_smi = shutil.which("nvidia-smi") or sys.exit("no nvidia-smi on PATH")
    python = task_python()
    section("outside the sandbox")
    print(f"libcuda: {cuda}\nnvidia-smi: {nvidia_smi}\npython: {python}")
    for path in (cuda, nvidia_smi):
        if not runnable_by_others(path):
            print(f"warning: the task's uid may not reach {path}")
    print("nvidia-smi -L:\n" + sh(f"{nvidia_smi} -L"))
    counted = subprocess.run([python, "-I", "-S", "-c", CUDA_COUNT, cuda], capture_output=True)
    print((counted.stdout + counted.stderr).decode(errors="replace").strip())
    print("device nodes:\n" + sh("ls -l /dev | grep -i nvidia; ls -l /dev/nvidia-caps"))
    print(sh("grep -H -e Minor -e UUID /proc/driver/nvidia/gpus/*/information"))
    print(sh("cat /proc/driver/nvidia-caps/mig-minors 2>/dev/null | head -3"))
    found = gpus.detect()
    for gpu in found:
        print(gpu)
    if not found:
        sys.exit("gpus.detect() found no GPU")
    top = Path(tempfile.mkdtemp(prefix="gpu-check-", dir="/var/tmp"))  # noqa: S108
    top.chmod(0o755)
    try:
        wanted = {f.name for f in dataclasses.fields(SandboxConfig)}
        options = {"bwrap": passable_bwrap(top), "disk_mb": 0, "require_limits": False}
        config = SandboxConfig(**{k: v for k, v in options.items() if k in wanted})  # type: ignore[arg-type]
        backend = LocalBackend(top / "tasks", sandbox_config=config)
        env = {"NVIDIA_SMI": nvidia_smi, "PYTHON": python, "LIBCUDA": cuda}
        if os.environ.get("LD_LIBRARY_PATH"):  # where nvidia-smi finds libnvidia-ml
            env["LD_LIBRARY_PATH"] = os.environ["LD_LIBRARY_PATH"]
        section("a task given 1 GPU, in the sandbox")
        given = run_task(backend, task(0, 1, env))
        section("a task given no GPU, in the sandbox")
        none = run_task(backend, task(1, 0, env))
    finally:
        shutil.rmtree(top, ignore_errors=True)
    uuid = found[0].uuid  # the backend hands out the first free GPU
    listed = [line for line in given.splitlines() if line.startswith("GPU ")]
    cuda_devices = re.findall(r"^CUDA device \d+: .*$", given, re.MULTILINE)
    checks = {
        "the task given 1 GPU counts 1 CUDA device": "CUDA device count: 1" in given,
        "its nvidia-smi -L lists the host's GPU 0 alone": len(listed) == 1 and uuid in listed[0],
        "its CUDA device 0 is that GPU": len(cuda_devices) == 1 and uuid in cuda_devices[0],
        "the task given no GPU counts 0 CUDA devices": "CUDA device count: 0" in none,
        "the task given no GPU has no nvidia-smi": "UUID" not in none,
    }
    section("verdict")
    for what, ok in checks.items():
        print(f"{'PASS' if ok else 'FAIL'}: {what}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
