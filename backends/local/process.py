"""Process, file and machine helpers for the local backend (``backends.local``).

Everything here reads ``/proc`` or small files directly: observing a task must stay cheap (a
couple of file reads, never a subprocess).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# What starts a task, outlives the portal's processes, keeps its logs (each capped) and records
# how it ended (``exit_code``, then ``ended_marker``): ``wrapper.c``, built by ``make install``
# beside the portal's Python.
WRAPPER = Path(sys.prefix, "bin", "portal-task-wrapper")
DEFAULT_LOG_MAX_BYTES = 1024**3  # per stream; LOCAL_TASK_LOG_MAX_BYTES


@dataclass
class TaskRecord:
    """``task.json``: what the backend needs to find a task again, from any instance."""

    pid: int | None  # the task's main process (``/bin/sh ./bootstrap.sh``)
    pgid: int | None  # the task's process group (and session): equal to ``pid``
    start_time: int | None  # /proc/<pid>/stat field 22, guards against pid reuse
    wrapper_pid: int | None  # the shell that waits for the task and writes ``exit_code``
    wrapper_start_time: int | None
    started_at: str  # ISO 8601, UTC
    gpus: list[int] = field(default_factory=list)
    ports: dict[str, list[int]] = field(default_factory=dict)
    stop_requested_at: str | None = None
    sandboxed: bool = False  # in bwrap: ``pid`` is bwrap, the bootstrap its sandbox's pid 1
    uid: int | None = None  # the uid the task runs as, when the portal (root) chose one

    @classmethod
    def load(cls, path: Path) -> TaskRecord | None:
        try:
            data: Any = json.loads(path.read_text())
            return cls(
                pid=_opt_int(data.get("pid")),
                pgid=_opt_int(data.get("pgid")),
                start_time=_opt_int(data.get("start_time")),
                wrapper_pid=_opt_int(data.get("wrapper_pid")),
                wrapper_start_time=_opt_int(data.get("wrapper_start_time")),
                started_at=str(data["started_at"]),
                gpus=[int(i) for i in data.get("gpus", [])],
                ports={str(k): [int(p) for p in v] for k, v in data.get("ports", {}).items()},
                stop_requested_at=data.get("stop_requested_at"),
                sandboxed=bool(data.get("sandboxed", False)),
                uid=_opt_int(data.get("uid")),
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def save(self, path: Path) -> None:
        tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(asdict(self), indent=2))
        os.replace(tmp, path)

    def alive(self) -> bool:
        """Whether the task or its wrapper still runs (not a zombie, and not a reused pid)."""
        return is_alive(self.wrapper_pid, self.wrapper_start_time) or is_alive(
            self.pid, self.start_time
        )


def _opt_int(value: object) -> int | None:
    return None if value is None else int(str(value))


def proc_stat(pid: int) -> tuple[str, int] | None:
    """The state letter and start time (clock ticks after boot) of ``pid``, or None."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    rest = raw[raw.rfind(b")") + 2 :].split()  # the command name may hold spaces and parens
    try:
        return rest[0].decode(), int(rest[19])
    except (IndexError, ValueError):
        return None


def start_time_of(pid: int | None) -> int | None:
    stat = proc_stat(pid) if pid is not None else None
    return stat[1] if stat else None


def is_alive(pid: int | None, start_time: int | None) -> bool:
    if pid is None or start_time is None:
        return False
    stat = proc_stat(pid)
    return stat is not None and stat[0] not in ("Z", "X", "x") and stat[1] == start_time


def spawn_detached(
    workdir: Path,
    env: dict[str, str],
    log_max_bytes: int = DEFAULT_LOG_MAX_BYTES,
    command: list[str] | None = None,
) -> tuple[int, int | None]:
    """Start ``command`` (by default ``/bin/sh ./bootstrap.sh``; named by its path) detached in
    ``workdir`` by the task wrapper (``WRAPPER``), each of its output streams capped at
    ``log_max_bytes`` in its log; return the wrapper's pid and the task's pid."""
    if not os.access(WRAPPER, os.X_OK):
        raise OSError(f"the task wrapper {WRAPPER} is not built: an admin runs `make install`")
    command = command or ["/bin/sh", "./bootstrap.sh"]
    proc = subprocess.Popen(
        [str(WRAPPER), str(log_max_bytes), *command],
        cwd=workdir,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        umask=0o077,  # logs, exit code and whatever the task writes: its owner's only
    )
    assert proc.stdout is not None
    with proc.stdout:
        wrapper = proc.stdout.readline().strip()
        task = proc.stdout.readline().strip()  # its pid once forked (empty: it was not)
    if proc.wait() != 0 or not wrapper.isdigit():
        raise OSError(
            f"could not start the task in {workdir} (its wrapper exited {proc.returncode})"
        )
    return int(wrapper), int(task) if task.isdigit() else None


def free_ports(
    counts: list[dict[str, int]], taken: Collection[int], within: range | None = None
) -> list[dict[str, list[int]]]:
    """Free TCP ports for each ``{label: count}``, unique across the call and not in ``taken``:
    any the kernel hands out, or only ports ``within`` a range (``LOCAL_TASK_PORTS``: a
    container publishes that range to its host)."""
    held: list[socket.socket] = []
    candidates = iter(within or ())

    def bound(port: int) -> int | None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        held.append(sock)  # kept bound until the end, so no port is handed out twice
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:  # in use by something that is not a task
            return None
        got: int = sock.getsockname()[1]
        return got if got not in taken else None

    def one() -> int:
        if within is None:
            for _ in range(1000):
                if (port := bound(0)) is not None:
                    return port
            raise OSError("no free TCP port found")
        for candidate in candidates:
            if candidate not in taken and (port := bound(candidate)) is not None:
                return port
        raise OSError(f"no free port left in LOCAL_TASK_PORTS {within.start}-{within.stop - 1}")

    try:
        return [{label: [one() for _ in range(n)] for label, n in c.items()} for c in counts]
    finally:
        for sock in held:
            sock.close()


def memory_mb() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def session_usage(sessions: Collection[int]) -> dict[int, tuple[float, int]]:
    """CPU seconds and resident memory (bytes) of the processes of each session in
    ``sessions``, from one walk of /proc: an unsandboxed task has no cgroup to read. CPU time
    counts the processes alive and the children they have waited for (``cutime``/``cstime``);
    that of a process gone with no one waiting for it is lost, so this is a floor."""
    wanted, found = set(sessions), dict[int, tuple[float, int]]()
    tick, page = os.sysconf("SC_CLK_TCK"), os.sysconf("SC_PAGE_SIZE")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_bytes()
        except OSError:
            continue
        rest = raw[raw.rfind(b")") + 2 :].split()
        try:
            session = int(rest[3])
            if session not in wanted:
                continue
            ticks = sum(int(rest[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
            rss = int(rest[21]) * page
        except (IndexError, ValueError):
            continue
        cpu, memory = found.get(session, (0.0, 0))
        found[session] = (cpu + ticks / tick, memory + rss)
    return found
