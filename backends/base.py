"""The interface every execution backend implements.

Backends never touch the ORM: they take plain data in and give observations out. The lifecycle
(``jobs.lifecycle``) asks a backend to *place* the tasks of an attempt (addresses and ports, known
before anything starts, so that every task's environment can name its peers), renders each
task's bootstrap script with those placements, then *launches* each task and later *observes*
all live tasks in one call.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, runtime_checkable

LOG_CHUNK_BYTES = 1024 * 1024  # what one step of a log download holds in memory


class TaskPhase(enum.StrEnum):
    """What a backend can say about one task it launched."""

    PENDING = "pending"  # accepted by the backend, not running yet (image pull, scheduling)
    RUNNING = "running"
    SUCCEEDED = "succeeded"  # exited with code 0
    FAILED = "failed"  # exited non-zero, was killed, or could not start
    GONE = "gone"  # the backend knows nothing of it (stopped and cleaned up, or lost)


@dataclass(frozen=True)
class TaskShape:
    """What one task asks for; the input to placement."""

    role: str
    index: int
    cpu: int
    memory_mb: int
    gpu: int
    port_counts: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Placement:
    """Where a task will be reachable: its address and its ports per label."""

    ip: str
    ports: dict[str, list[int]]


class StorageKind(enum.StrEnum):
    """The kinds of storage admins define (``clusters.models.Storage.kind``)."""

    LOCAL_DIR = "local-dir"  # a directory of the portal's machine (a hostPath on Kubernetes)
    PVC = "pvc"  # a Kubernetes PersistentVolumeClaim
    NFS = "nfs"  # an NFS export, ``server:path``


@dataclass(frozen=True)
class StorageMount:
    """A storage a task mounts at ``/mnt/<name>`` (teamwise_storage plugin)."""

    name: str
    kind: str  # a StorageKind
    path: str = ""  # local-dir: the directory; nfs: the exported path
    server: str = ""  # nfs
    claim_name: str = ""  # pvc
    read_only: bool = False


@dataclass(frozen=True)
class TaskLaunch:
    """Everything needed to start one task."""

    attempt_key: str  # unique per job attempt, safe in file names and labels: [a-z0-9-]
    role: str
    index: int
    retry: int  # 0 for the first run of the task in this attempt
    script: str  # the bootstrap script, run with /bin/sh
    env: dict[str, str]  # environment for the script (PAI_* and friends)
    placement: Placement
    cpu: int
    memory_mb: int
    gpu: int
    image: str = ""
    shm_mb: int = 64
    gpu_type: str = ""  # a GPU type the task must run on ("" = any); kubernetes: a node selector
    # Registry credentials for the image, ``{registry, username, password}`` (a ``dockerimage``
    # prerequisite's ``auth``); kubernetes turns them into an image pull secret.
    pull_secret: dict[str, str] | None = None
    # Secret files, path relative to the task's working directory -> content (the job's SSH
    # private key, ...): kept out of the script. The local backend writes them (mode 600) before
    # the task starts; kubernetes mounts them read-only from the task's Secret at
    # ``$PAI_FILES_DIR/<path>`` and the script copies them into place.
    files: dict[str, str] = field(default_factory=dict)
    # The storages to mount; a backend that cannot mount one refuses the launch with a reason.
    storages: list[StorageMount] = field(default_factory=list)
    # > 0 (jobEnvs.isDebug): a task that fails stays inspectable for that many hours after it
    # ended (local: its directory has ``.keep_until``; kubernetes: its pod is kept by ``stop``
    # and ``cleanup``).
    debug_keep_hours: int = 0
    # The portal user the task runs for: the local backend, as root, runs it under a uid of
    # that user's own; an admin's task may run unsandboxed where the sandbox tool is missing.
    owner_id: int | None = None
    owner_is_admin: bool = False


class BackendUnavailable(RuntimeError):
    """The backend could not be reached or kept refusing for now (an API outage, a 429/5xx
    storm): nothing is known to have failed, so whatever was asked stays as it was, to be tried
    again by a later reconcile pass. Any other exception from ``launch`` is a genuine refusal
    that fails the task with its reason."""


def check_file_path(path: str) -> str:
    """``path`` when it is a plain relative path inside the working directory (no ``..``, not
    absolute, no empty parts); ValueError otherwise."""
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"not a relative file path inside the task's directory: {path!r}")
    return path


@dataclass(frozen=True)
class Observation:
    """One backend's view of one task at one moment."""

    ref: str
    phase: TaskPhase
    ip: str = ""
    node: str = ""
    exit_code: int | None = None
    diagnostics: str = ""
    started_at: datetime | None = None
    finished_at: datetime | None = None
    # A backend that learns a task's ports only once it runs (Slurm: the task chooses them on
    # its node) reports them with the RUNNING task; ``awaits_peers``: the task waits in its
    # barrier for ``SupportsPeers.publish_peers``.
    ports: dict[str, list[int]] | None = None
    awaits_peers: bool = False


class TerminalSession(Protocol):
    """A live interactive shell in a running task, as the web terminal drives it.

    ``read`` blocks (at most ``timeout`` seconds) and is called from one reader thread only;
    ``write``, ``resize`` and ``close`` come from the terminal's own side. ``close`` is called
    once, after the reader has stopped, and ends the shell.
    """

    def read(self, timeout: float) -> bytes | None:
        """Output that came within ``timeout`` seconds; None when none did, b"" once the shell
        has ended (and ever after)."""
        ...

    def write(self, data: bytes) -> None:
        """Keystrokes for the shell's terminal."""
        ...

    def resize(self, cols: int, rows: int) -> None: ...

    def task_ended(self) -> bool:
        """Once ``read`` gave b"": whether the shell ended because its task did (it was killed
        with the task), not because the user left it."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Capacity:
    cpu: int
    memory_mb: int
    gpus: dict[str, int] = field(default_factory=dict)  # GPU type -> count


class Backend(Protocol):
    name: str

    def place(self, attempt_key: str, shapes: list[TaskShape]) -> list[Placement]:
        """Addresses and ports for each shape, in the same order."""
        ...

    def launch(self, task: TaskLaunch) -> str:
        """Start one task; return the backend's reference to it (stable across restarts)."""
        ...

    def observe(self, refs: list[str]) -> dict[str, Observation]:
        """The current observation of each ref, in one call; unknown refs are GONE."""
        ...

    def stop(self, refs: list[str]) -> None:
        """Ask every task to stop; it is stopped when ``observe`` no longer reports it running."""
        ...

    def read_log(self, ref: str, stream: str, tail_bytes: int | None = None) -> bytes:
        """The task's ``stdout`` or ``stderr``; the last ``tail_bytes`` when given."""
        ...

    def read_log_head(self, ref: str, stream: str, head_bytes: int) -> bytes:
        """The first ``head_bytes`` of the task's ``stdout`` or ``stderr`` (what the bootstrap
        said while it set the task up, e.g. whether sshd started)."""
        ...

    def log_chunks(
        self, ref: str, stream: str, chunk_bytes: int = LOG_CHUNK_BYTES
    ) -> Iterator[bytes]:
        """The task's whole ``stdout`` or ``stderr`` in chunks of at most ``chunk_bytes``, read
        as they are sent: a log of any size costs the caller one chunk of memory."""
        ...

    def capacity(self) -> Capacity: ...

    def shell(self, ref: str) -> TerminalSession | None:
        """An interactive shell in the task, with its working directory and environment, open
        (local: a process joining the task's sandbox under a pty of this machine; Kubernetes: a
        pod exec stream); None when the task is not running."""
        ...


@runtime_checkable
class SupportsPeers(Protocol):
    """An optional method of a backend whose tasks learn their addresses only once they run
    (Slurm): ``publish_peers`` hands a task that ``awaits_peers`` its environment rendered with
    every task's address and ports, which its barrier reads (``peers.env``). The lifecycle
    calls it once every task of the attempt has an address (``jobs.lifecycle.peers``)."""

    def publish_peers(self, ref: str, env: dict[str, str]) -> None: ...


@runtime_checkable
class StartsOnLaunch(Protocol):
    """A backend whose ``launch`` returns once the task's process has started (local: it starts
    the process itself) says so with ``launch_node``, the node its tasks run on: the pass saves
    a task it launched as RUNNING there at once instead of observing it (Kubernetes and Slurm
    only queue what they launch). A task that ended meanwhile is seen when its end is reported."""

    launch_node: str


@runtime_checkable
class SupportsRunAs(Protocol):
    """An optional method of a backend whose tasks run as an account of the cluster (Slurm):
    who a user's tasks run as, in words, for the job page."""

    def runs_as(self, user: str) -> str: ...


@runtime_checkable
class SupportsNodes(Protocol):
    """An optional method of a backend: the capacity of each node by name, for the Node table
    (``clusters.capacity.backend_nodes``; without it the whole cluster is one node)."""

    def nodes(self) -> dict[str, Capacity]: ...


@runtime_checkable
class SupportsLimits(Protocol):
    """Optional methods of a backend that enforces a task's limits itself (the local one):
    ``describe_limits`` a line each on what holds on this host (start-up output, the admin's
    Nodes page), ``unlimited`` the limits a task would run without (the job page says so),
    ``fence`` the host's enforcement brought to what the running tasks need (none when none
    runs: called as the portal stops, so that nothing of it is left on the host)."""

    def describe_limits(self) -> list[str]: ...

    def unlimited(self) -> list[str]: ...

    def fence(self) -> None: ...


@runtime_checkable
class SupportsCleanup(Protocol):
    """An optional method of a backend: remove what is left of attempts no longer needed.

    ``cleanup(keep_attempt_keys)`` deletes everything the backend holds for attempts whose key
    is not in ``keep_attempt_keys`` (the reconcile pass passes the attempts that are running or
    finished recently, so that their logs stay readable; attempts of unknown jobs go too),
    except the failed tasks of debug jobs still within their keep time. It returns the keys of
    the attempts it removed (or stopped) something of. Backends without it keep everything
    (the reconcile pass checks with ``isinstance(backend, SupportsCleanup)``).
    """

    def cleanup(self, keep_attempt_keys: Collection[str]) -> list[str]: ...


@dataclass(frozen=True)
class Usage:
    """What one running task uses now (None: the backend cannot tell). CPU comes as the
    cumulative seconds of CPU time the task has used, so that whoever samples it turns two
    readings into cores used between them, whichever process read them; memory is the working
    set (what the kernel cannot reclaim: the figure its memory limit is enforced on); GPU
    figures are those of the task's own GPUs (utilisation averaged, memory summed)."""

    cpu_seconds: float | None = None
    memory_bytes: int | None = None
    gpu_util: float | None = None  # percent, 0-100
    gpu_memory_bytes: int | None = None
    # Or, instead of cpu_seconds, the cores used over a window the backend chose itself
    # (Kubernetes' metrics API).
    cpu_cores: float | None = None


@runtime_checkable
class SupportsUsage(Protocol):
    """An optional method of a backend: the resource usage of running tasks, read in one call
    (``jobs.usage`` samples it every ``USAGE_SAMPLE_SECONDS``). A ref that is not running, or
    that the backend does not know, is left out of the answer."""

    def usage(self, refs: list[str]) -> dict[str, Usage]: ...


@dataclass(frozen=True)
class WatchedChanges:
    """What a backend's watch saw change together: the new observation of each task it knows
    (GONE for one whose object was deleted). ``resync``: the backend lost track and listed
    everything again, so ``observations`` holds every task it knows and any other is gone."""

    observations: dict[str, Observation]
    resync: bool = False


@runtime_checkable
class SupportsWatch(Protocol):
    """An optional method of a backend: changes as they happen, so that the reconcile loop
    is woken by them instead of waiting for its next periodic pass (Kubernetes: a watch on the
    portal's pods). ``watch`` runs until ``stop`` is set; an empty batch says only that the
    watch is alive and caught up."""

    def watch(self, stop: threading.Event | None = None) -> Iterator[WatchedChanges]: ...
