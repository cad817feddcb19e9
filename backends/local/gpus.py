"""The GPUs of this machine, and what a task given some of them sees, by CUDA's rules.

``nvidia-smi``'s index is not the name of a GPU's device node: the driver names the node after
its minor number (``/dev/nvidia<minor>``, in the order it probed the cards), which
``/proc/driver/nvidia/gpus/<PCI bus id>/information`` gives. A task's sandbox holds the nodes of
its own GPUs only, and CUDA numbers the devices it can open from 0, so inside the sandbox its
GPUs are ``0..n-1`` in PCI bus order (``CUDA_DEVICE_ORDER=PCI_BUS_ID``, the order NVML and
``nvidia-smi`` use too), as in a container of the NVIDIA runtime. ``NVIDIA_VISIBLE_DEVICES``
carries the host's indices, as OpenPAI sets it for the NVIDIA runtime.

The sandbox's ``/proc/driver`` is rebuilt as nvidia-container-toolkit does for a container: every
entry as on the host, except that ``nvidia/gpus`` lists the task's own GPUs and
``nvidia/capabilities`` their MIG capabilities only. A GPU in MIG mode is given whole: its MIG
instances' capability nodes (``/dev/nvidia-caps/nvidia-cap<N>``, as listed by the driver's
``nvidia-caps/mig-minors``) are bound with it. Handing out a single MIG instance is not done.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

# The control nodes a CUDA program opens besides its GPUs' /dev/nvidia<minor>.
CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools")
PROC_DRIVER = Path("/proc/driver")  # holds the driver's nvidia/ and nvidia-caps/
CAPS_DIR = "nvidia-caps"  # under /dev: the MIG capability nodes, nvidia-cap<N>
QUERY = ["nvidia-smi", "--query-gpu=index,name,uuid,pci.bus_id", "--format=csv,noheader"]


@dataclass(frozen=True)
class GPU:
    """One GPU of this machine."""

    index: int  # nvidia-smi's (NVML's) index on the host
    name: str
    uuid: str  # GPU-..., "" where nvidia-smi did not say
    bus_id: str  # its directory in /proc/driver/nvidia/gpus (e.g. 0000:3b:00.0), or ""
    minor: int  # the driver's minor number: its node is /dev/nvidia<minor>


def detect(proc_driver: Path = PROC_DRIVER) -> list[GPU]:
    """The GPUs that ``nvidia-smi`` reports (empty without), each with the minor number the
    driver gives under ``proc_driver``; a GPU the driver's files do not name keeps its
    index as minor number, the usual case."""
    try:
        out = subprocess.run(QUERY, capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    known = _driver_gpus(proc_driver / "nvidia" / "gpus")
    gpus = []
    for line in out.splitlines():
        # "[N/A]", "[Not Supported]": a value nvidia-smi does not know
        fields = ["" if f.strip().startswith("[") else f.strip() for f in line.split(",")]
        if not fields[0].isdigit():
            continue
        index = int(fields[0])
        uuid, bus = (fields[-2], fields[-1]) if len(fields) >= 4 else ("", "")
        name = ", ".join(fields[1:-2] if len(fields) >= 4 else fields[1:])
        entry = known.get(normal_bus_id(bus)) or known.get(uuid.lower())
        if entry is None:
            gpus.append(GPU(index, name, uuid, normal_bus_id(bus), index))
        else:
            gpus.append(GPU(index, name, uuid, entry[0], entry[1]))
    return gpus


def _driver_gpus(gpus_dir: Path) -> dict[str, tuple[str, int]]:
    """Each GPU directory of the driver and its minor number, found by bus id and by UUID."""
    found: dict[str, tuple[str, int]] = {}
    try:
        entries = sorted(gpus_dir.iterdir())
    except OSError:
        return found
    for entry in entries:
        fields = _information(entry / "information")
        minor = fields.get("device minor", "")
        if not minor.isdigit():
            continue
        for key in (normal_bus_id(entry.name), fields.get("gpu uuid", "").lower()):
            if key:
                found[key] = (entry.name, int(minor))
    return found


def _information(path: Path) -> dict[str, str]:
    """The ``Key: value`` lines of a driver's ``information`` file, keys in lower case."""
    try:
        text = path.read_text()
    except OSError:
        return {}
    fields = {}
    for line in text.splitlines():
        key, colon, value = line.partition(":")
        if colon:
            fields[key.strip().lower()] = value.strip()
    return fields


def normal_bus_id(bus_id: str) -> str:
    """A PCI bus id as the driver names its directory (``0000:3b:00.0``): nvidia-smi writes
    ``00000000:3B:00.0``. Empty for what is not one."""
    domain, colon, rest = bus_id.strip().partition(":")
    try:
        return f"{int(domain, 16):04x}:{rest.lower()}" if colon and rest else ""
    except ValueError:
        return ""


def in_bus_order(gpus: list[GPU]) -> list[GPU]:
    """The order CUDA numbers them in with ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (those of an
    unknown bus id last, by index)."""

    def position(gpu: GPU) -> tuple[bool, tuple[int, ...], int]:
        parts = normal_bus_id(gpu.bus_id).replace(".", ":").split(":")
        try:
            return False, tuple(int(part, 16) for part in parts), gpu.index
        except ValueError:
            return True, (), gpu.index

    return sorted(gpus, key=position)


def environment(gpus: list[GPU] | None, sandboxed: bool) -> dict[str, str]:
    """The GPU variables of a task given ``gpus`` (None: this machine has none, nothing set).
    In the sandbox CUDA sees only the task's GPUs and numbers them from 0; unsandboxed it sees
    every GPU of the machine, so they are named by UUID (by index, in the same bus order,
    where nvidia-smi gave no UUID)."""
    if gpus is None:
        return {}
    if not gpus:  # a task without GPUs on a machine with some
        return {"CUDA_VISIBLE_DEVICES": "", "NVIDIA_VISIBLE_DEVICES": "void"}
    ordered = in_bus_order(gpus)
    if sandboxed:
        visible = [str(number) for number in range(len(ordered))]
    elif all(gpu.uuid for gpu in ordered):
        visible = [gpu.uuid for gpu in ordered]
    else:
        visible = [str(gpu.index) for gpu in ordered]
    return {
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "CUDA_VISIBLE_DEVICES": ",".join(visible),
        "NVIDIA_VISIBLE_DEVICES": ",".join(str(gpu.index) for gpu in ordered),
    }


def device_nodes(gpus: list[GPU] | None, dev_dir: Path, proc_driver: Path) -> list[str]:
    """The device nodes (relative to ``dev_dir``) of the GPUs a task was given, of the control
    nodes they need and of their MIG instances, those that exist: the task's /dev has these
    and no other."""
    if not gpus:
        return []
    names = [f"nvidia{gpu.minor}" for gpu in gpus] + list(CONTROL_NODES)
    names += [f"{CAPS_DIR}/nvidia-cap{minor}" for minor in mig_minors(gpus, proc_driver)]
    return [name for name in names if (dev_dir / name).exists()]


def mig_minors(gpus: list[GPU], proc_driver: Path) -> list[int]:
    """The minor numbers of the MIG capability nodes of ``gpus`` (their GPU and compute
    instances' ``access``), from the driver's ``nvidia-caps/mig-minors``: ``gpu<minor>/gi<G>/
    access <N>`` and ``gpu<minor>/gi<G>/ci<C>/access <N>`` lines; none without MIG."""
    try:
        lines = (proc_driver / CAPS_DIR / "mig-minors").read_text().splitlines()
    except OSError:
        return []
    prefixes = tuple(f"gpu{gpu.minor}/" for gpu in gpus)
    minors = []
    for line in lines:
        path, _, minor = line.strip().partition(" ")
        if path.startswith(prefixes) and minor.strip().isdigit():
            minors.append(int(minor))
    return minors


def bwrap_args(gpus: list[GPU] | None, dev_dir: Path, proc_driver: Path) -> list[str]:
    """bwrap's arguments, after its ``--proc`` and ``--dev``: the nodes of ``device_nodes``
    and a ``/proc/driver`` without other GPUs' entries (where the driver has one)."""
    args = []
    nodes = device_nodes(gpus, dev_dir, proc_driver)
    if any(name.startswith(f"{CAPS_DIR}/") for name in nodes):
        args += ["--dir", f"/dev/{CAPS_DIR}"]
    for name in nodes:
        args += ["--dev-bind", str(dev_dir / name), f"/dev/{name}"]
    return args + proc_driver_args(gpus or [], proc_driver)


def proc_driver_args(gpus: list[GPU], proc_driver: Path) -> list[str]:
    """A tmpfs over the sandbox's ``/proc/driver`` that holds ``proc_driver``'s entries, but
    of ``nvidia/gpus`` and ``nvidia/capabilities`` only those of ``gpus``: NVML and
    ``nvidia-smi`` list what is there. Nothing where the driver has no ``nvidia`` entry."""
    nvidia = proc_driver / "nvidia"
    try:
        entries = sorted(proc_driver.iterdir())
        own = sorted(nvidia.iterdir())
    except OSError:
        return []
    target = Path("/proc/driver")
    args = ["--tmpfs", str(target)]
    for entry in entries:
        if entry.name != "nvidia":
            args += ["--ro-bind", str(entry), str(target / entry.name)]
    args += ["--dir", str(target / "nvidia")]
    kept = {
        "gpus": {gpu.bus_id for gpu in gpus if gpu.bus_id},
        "capabilities": {f"gpu{gpu.minor}" for gpu in gpus},
    }
    for entry in own:
        inside = target / "nvidia" / entry.name
        if entry.name not in kept:
            args += ["--ro-bind", str(entry), str(inside)]
            continue
        args += ["--dir", str(inside)]
        for name in sorted(kept[entry.name]):
            if (entry / name).exists():
                args += ["--ro-bind", str(entry / name), str(inside / name)]
    return [*args, "--remount-ro", str(target)]


# Each GPU's utilisation (% of the last sample period a kernel ran) and memory in use (MiB):
# a task's GPUs are its own (``LocalBackend._choose_gpus``), so what a GPU does is its task's.
USAGE_QUERY = [
    "nvidia-smi",
    "--query-gpu=index,utilization.gpu,memory.used",
    "--format=csv,noheader,nounits",
]


def utilization() -> dict[int, tuple[float | None, int | None]]:
    """Each GPU's utilisation in percent and memory in use in bytes, by nvidia-smi's index
    (None for a figure it does not know, "[N/A]"); empty without nvidia-smi."""
    try:
        out = subprocess.run(
            USAGE_QUERY, capture_output=True, text=True, timeout=10, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    found: dict[int, tuple[float | None, int | None]] = {}
    for line in out.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 3 or not fields[0].isdigit():
            continue
        util, memory = _float(fields[1]), _float(fields[2])
        found[int(fields[0])] = (util, None if memory is None else int(memory * 1024 * 1024))
    return found


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None
