"""The kernel's limits of a task on the local backend: a cgroup per task, on cgroup v2 (the
unified hierarchy every current distribution mounts alone) or v1, as root.

On v2 each task gets ``<root>/portal-tasks/<task>`` with ``memory.max`` (and ``memory.swap.max``
0: memoryMB covers swap too), ``memory.oom.group`` (the kernel kills the whole task when it goes
over, as Kubernetes does on v2), ``cpu.max`` and ``pids.max``; the controllers are enabled on the
way down (``cgroup.subtree_control``). On v1 it gets one cgroup in each of the ``memory``,
``cpu`` and ``pids`` hierarchies. A hybrid host (v1 controllers, an empty v2 at ``unified/``)
counts as v1. The task's wrapper joins them by writing its pid to each ``cgroup.procs``.

``detect`` says which controllers can be used on this host; the backend refuses other users'
tasks where one is missing (``LOCAL_REQUIRE_LIMITS``) and says so on the admin and job pages.
"""

from __future__ import annotations

import contextlib
import os
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
PARENT = "portal-tasks"
CONTROLLERS = ("memory", "cpu", "pids")
# v1 only: the controller that counts a cgroup's CPU time (``cpuacct.usage``), for a task's
# usage chart. Often mounted with ``cpu`` (``cpu,cpuacct``); where it is a hierarchy of its own
# the task gets a cgroup there too. It limits nothing: a host without it is not "unlimited".
CPU_ACCOUNTING = "cpuacct"
CPU_PERIOD_US = 100_000
DEFAULT_PIDS_MAX = 4096  # LOCAL_TASK_PIDS_MAX: processes and threads of one task


@dataclass(frozen=True)
class Hierarchy:
    """Which cgroup hierarchy this host has and which of ``CONTROLLERS`` the portal can use."""

    version: int  # 2, 1, or 0: none the portal can write (not root, or not mounted)
    root: Path
    controllers: tuple[str, ...]

    @property
    def missing(self) -> tuple[str, ...]:
        return tuple(c for c in CONTROLLERS if c not in self.controllers)

    def describe(self) -> str:
        """One line for the start-up output, the admin pages and the job page."""
        if not self.controllers:
            return (
                "no cgroup controller can be used (the portal is not root, or no cgroup file "
                f"system at {self.root}): tasks' memory, cpu and processes are not limited"
            )
        text = f"cgroup v{self.version}: {', '.join(self.controllers)} limited per task"
        if self.missing:
            text += f"; {', '.join(self.missing)} NOT limited (controller unavailable)"
        return text


@dataclass(frozen=True)
class Limits:
    memory_mb: int
    cpu: int
    pids: int = DEFAULT_PIDS_MAX


@dataclass(frozen=True)
class Events:
    """What the kernel counted against a task's limits."""

    oom_kills: int = 0
    pids_max: int = 0  # forks refused at pids.max


def detect(root: Path = ROOT) -> Hierarchy:
    if os.geteuid() != 0:
        return Hierarchy(0, root, ())
    if (root / "cgroup.controllers").is_file():  # the unified hierarchy alone: v2
        try:
            available = (root / "cgroup.controllers").read_text().split()
        except OSError:
            available = []
        usable = tuple(c for c in CONTROLLERS if c in available and _enable_v2(root, c))
        return Hierarchy(2, root, usable)
    usable = tuple(c for c in CONTROLLERS if _v1_parent(root, c) is not None)
    return Hierarchy(1 if usable else 0, root, usable)


def _enable_v2(root: Path, controller: str) -> bool:
    """Enable ``controller`` for ``root/PARENT``'s children (and for ``PARENT`` itself)."""
    parent = root / PARENT
    try:
        parent.mkdir(exist_ok=True)
        for node in (root, parent):
            control = node / "cgroup.subtree_control"
            if controller not in control.read_text().split():
                control.write_text(f"+{controller}")
    except OSError:
        return False
    return True


def _v1_parent(root: Path, controller: str) -> Path | None:
    if not (root / controller / "cgroup.procs").is_file():
        return None
    parent = root / controller / PARENT
    try:
        parent.mkdir(exist_ok=True)
    except OSError:
        return None
    return parent


# A task's join (its prelude's write to ``cgroup.procs``) takes the kernel's one lock on every
# process's cgroups, and taking it waits for an RCU grace period unless it was last taken less
# than about one before: 5 to 15 ms on a 2-CPU machine, most of a lone task's start in its
# sandbox. ``warm_attach`` takes it once the task's cgroups are made, on a thread of its own, by
# rejoining the worker to the cgroup it is in (the kernel moves nothing and calls no controller),
# so the grace period passes while the launch writes the rest and its wrapper starts; the
# task's join then waits for what is left of it. Not before they are made: the rejoin holds the
# kernel's cgroup mutex while it waits, and making a cgroup (a mkdir) takes that mutex, so the
# launch, inside the serial pass, would wait out the grace period instead of the task (300 jobs
# at one job per CPU, four runs each taken in turn: 18.0-20.9 s against 21.4-22.6 s). The
# task's own join is unchanged: this only comes first.
REJOIN_CALLS = ThreadPoolExecutor(1, thread_name_prefix="cgroup-rejoin")


def warm_attach(hierarchy: Hierarchy) -> Future[bool] | None:
    """Take the cgroup lock now, off the caller's thread, for a task's join soon after."""
    own = own_procs(hierarchy)
    return None if own is None else REJOIN_CALLS.submit(rejoin, own)


def own_procs(hierarchy: Hierarchy) -> Path | None:
    """The ``cgroup.procs`` of this process's own cgroup in a hierarchy the tasks use."""
    if not hierarchy.controllers:
        return None
    controller = hierarchy.controllers[0]
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:  # "<id>:<controllers>:<path>"; v2's own is "0::<path>"
        _, controllers, path = line.split(":", 2)
        if hierarchy.version == 2 and controllers == "":
            return hierarchy.root / path.lstrip("/") / "cgroup.procs"
        if hierarchy.version == 1 and controller in controllers.split(","):
            return hierarchy.root / controller / path.lstrip("/") / "cgroup.procs"
    return None


def rejoin(procs: Path) -> bool:
    """Write this process into ``procs``, its own cgroup's: whether the kernel took it."""
    try:
        procs.write_text("0")  # "0": the writer itself
    except OSError:  # a hint: the task's join works all the same
        return False
    return True


def name_of(ref: str) -> str:
    return ref.replace("/", ".")


def create(hierarchy: Hierarchy, ref: str, limits: Limits) -> list[Path]:
    """The task's cgroups with its limits; their ``cgroup.procs`` for its wrapper to join."""
    remove(hierarchy, ref)  # a stale one (same ref) would bring its limits and its counts
    if not hierarchy.controllers:
        return []
    if hierarchy.version == 2:
        path = hierarchy.root / PARENT / name_of(ref)
        path.mkdir(exist_ok=True)
        _write_v2(path, hierarchy.controllers, limits)
        return [path / "cgroup.procs"]
    procs = []
    for controller in hierarchy.controllers:
        path = hierarchy.root / controller / PARENT / name_of(ref)
        path.mkdir(exist_ok=True)
        _write_v1(path, controller, limits)
        procs.append(path / "cgroup.procs")
    accounting = _v1_accounting(hierarchy)
    if accounting is not None:
        path = accounting / name_of(ref)
        with contextlib.suppress(OSError):  # usage only: the task runs without it
            path.mkdir(exist_ok=True)
            procs.append(path / "cgroup.procs")
    return procs


def _v1_accounting(hierarchy: Hierarchy) -> Path | None:
    """``cpuacct``'s parent of the tasks' cgroups where it is a hierarchy apart from ``cpu``
    (co-mounted, the task's ``cpu`` cgroup counts its CPU time already); else None."""
    cpu, accounting = hierarchy.root / "cpu", hierarchy.root / CPU_ACCOUNTING
    try:
        if "cpu" in hierarchy.controllers and accounting.resolve() == cpu.resolve():
            return None
    except OSError:
        return None
    return _v1_parent(hierarchy.root, CPU_ACCOUNTING)


def _write_v2(path: Path, controllers: tuple[str, ...], limits: Limits) -> None:
    if "memory" in controllers and limits.memory_mb > 0:
        (path / "memory.max").write_text(str(limits.memory_mb * 1024 * 1024))
        if (path / "memory.swap.max").exists():  # no swap accounting: nothing to swap past
            (path / "memory.swap.max").write_text("0")
        (path / "memory.oom.group").write_text("1")
    if "cpu" in controllers and limits.cpu > 0:
        (path / "cpu.max").write_text(f"{limits.cpu * CPU_PERIOD_US} {CPU_PERIOD_US}")
    if "pids" in controllers and limits.pids > 0:
        (path / "pids.max").write_text(str(limits.pids))


def _write_v1(path: Path, controller: str, limits: Limits) -> None:
    if controller == "memory" and limits.memory_mb > 0:
        limit = str(limits.memory_mb * 1024 * 1024)
        swap = path / "memory.memsw.limit_in_bytes"
        # memory + swap may never be below memory alone: the order depends on the old values.
        try:
            (path / "memory.limit_in_bytes").write_text(limit)
        except OSError:
            swap.write_text(limit)
            (path / "memory.limit_in_bytes").write_text(limit)
        if swap.exists():
            swap.write_text(limit)  # no swapping past memoryMB either
    elif controller == "cpu" and limits.cpu > 0:
        (path / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
        (path / "cpu.cfs_quota_us").write_text(str(limits.cpu * CPU_PERIOD_US))
    elif controller == "pids" and limits.pids > 0:
        (path / "pids.max").write_text(str(limits.pids))


def events(hierarchy: Hierarchy, ref: str) -> Events:
    """The OOM kills and refused forks the kernel counted in the task's cgroups."""
    name = name_of(ref)
    if hierarchy.version == 2:
        path = hierarchy.root / PARENT / name
        memory, pids = path / "memory.events", path / "pids.events"
    else:
        memory = hierarchy.root / "memory" / PARENT / name / "memory.oom_control"
        pids = hierarchy.root / "pids" / PARENT / name / "pids.events"
    return Events(oom_kills=_count(memory, "oom_kill"), pids_max=_count(pids, "max"))


def _count(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def kill(hierarchy: Hierarchy, ref: str) -> None:
    """SIGKILL every process left in the task's cgroup (v2's ``cgroup.kill``; on v1 the
    sandbox's pid namespace does it when its init dies)."""
    if hierarchy.version == 2:
        with contextlib.suppress(OSError):
            (hierarchy.root / PARENT / name_of(ref) / "cgroup.kill").write_text("1")


def remove(hierarchy: Hierarchy, ref: str) -> None:
    """Remove the task's cgroups (the kernel refuses while a process is left in one)."""
    name = name_of(ref)
    paths = [hierarchy.root / PARENT / name]
    controllers = (*CONTROLLERS, CPU_ACCOUNTING)
    paths += [hierarchy.root / controller / PARENT / name for controller in controllers]
    for path in paths:
        with contextlib.suppress(OSError):
            path.rmdir()


def usage(hierarchy: Hierarchy, ref: str) -> tuple[float | None, int | None]:
    """The CPU seconds the task's cgroup has used since it was made and its memory working set
    in bytes (``memory.current``/``memory.usage_in_bytes`` less the inactive page cache, as
    Kubernetes' ``container_memory_working_set_bytes``); None for what cannot be read."""
    name = name_of(ref)
    if hierarchy.version == 2:
        path = hierarchy.root / PARENT / name
        usec = _count(path / "cpu.stat", "usage_usec")
        cpu = usec / 1e6 if (path / "cpu.stat").exists() else None
        memory = _working_set(path / "memory.current", path / "memory.stat", "inactive_file")
        return cpu, memory
    cpu = None
    for controller in (CPU_ACCOUNTING, "cpu"):  # its own hierarchy, or co-mounted with cpu
        nanoseconds = _number(hierarchy.root / controller / PARENT / name / "cpuacct.usage")
        if nanoseconds is not None:
            cpu = nanoseconds / 1e9
            break
    path = hierarchy.root / "memory" / PARENT / name
    memory = _working_set(
        path / "memory.usage_in_bytes", path / "memory.stat", "total_inactive_file"
    )
    return cpu, memory


def _working_set(usage_file: Path, stat_file: Path, inactive_key: str) -> int | None:
    used = _number(usage_file)
    if used is None:
        return None
    return max(0, used - _count(stat_file, inactive_key))


def _number(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None
