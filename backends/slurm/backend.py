"""The Slurm backend: a job attempt is one Slurm job on a site's cluster (``script``).

The portal's machine is a submit host (``commands``) and shares a directory with the nodes
(``root``, the same path everywhere: an HPC site's shared file system). Each task has its
directory there, ``<root>/<attempt>/<role>-<index>[-r<retry>]``, which holds what it starts
with (the bootstrap, its secret files, its ports), what it says (``address.json``,
``stdout.log``, ``stderr.log``, ``exit``) and what the portal says to it (``peers.env``, a
``stop``). A ref is ``<attempt>/<task directory>``.

``launch`` stages a task in its directory; the last task of an attempt to be staged submits the
attempt's job (every task of every role at once, so that Slurm places them together). A task
run again alone after a failure (``taskRetryCount``) is submitted as a job of its own.

``observe`` reads Slurm's queue once (``squeue``, finished jobs included while the controller
keeps them) and each task's files: a task is RUNNING from the moment it published its address,
its exit code is what its wrapper wrote, and a job that ended without one (killed at its memory
limit, a node lost, its time limit) says why in the words of ``states``. Slurm gives no ports:
the tasks choose them on their nodes, the lifecycle writes each one's ``peers.env``
(``publish_peers``) once every task of the attempt has an address, and the barrier of each
bootstrap waits for it.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shlex
import shutil
import stat
import threading
from collections.abc import Collection, Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from backends import logfiles as logs
from backends.base import (
    LOG_CHUNK_BYTES,
    Capacity,
    Observation,
    Placement,
    TaskLaunch,
    TaskPhase,
    TaskShape,
    WatchedChanges,
    check_file_path,
)
from backends.ended import ENDED_DIR, ended_batches
from backends.exits import describe_exit
from backends.logfiles import open_beneath
from backends.pty import PtySession, ShellSpec
from backends.slurm import states
from backends.slurm.commands import SlurmClient, SlurmError, SlurmJob
from backends.slurm.script import WRAPPER, Component, batch_script, component_of

log = logging.getLogger(__name__)
JOB_ID_FILE = "slurm-job"  # the Slurm job that runs the tasks of a directory (attempt or task)
ROLES_FILE = "roles.json"  # role -> component of the attempt's job
SMALL_FILE_BYTES = 64 * 1024  # read of a task's small files at most (address, exit code)


class SlurmBackendError(RuntimeError):
    """A launch the Slurm backend refuses (the task fails with this reason)."""


class SlurmBackend:
    name = "slurm"

    def __init__(
        self,
        root: Path,
        client: SlurmClient,
        partition: str = "",
        stop_grace_seconds: int = 10,
        vc_partitions: dict[str, str] | None = None,
    ) -> None:
        self.root = Path(root)
        self.client = client
        self.partition = partition
        self.vc_partitions = dict(vc_partitions or {})  # a virtual cluster -> its partition
        self.stop_grace_seconds = stop_grace_seconds

    # -- placing and launching ------------------------------------------------------------------

    def place(self, attempt_key: str, shapes: list[TaskShape]) -> list[Placement]:
        """No address is known before Slurm starts a task: the tasks publish theirs."""
        return [
            Placement("", {label: [0] * count for label, count in shape.port_counts.items()})
            for shape in shapes
        ]

    def launch(self, task: TaskLaunch) -> str:
        if task.storages:
            names = ", ".join(s.name for s in task.storages)
            raise SlurmBackendError(
                f"storages ({names}) are not mounted on Slurm: a site's file systems are "
                "already on its nodes; use their paths in the commands"
            )
        task_dir = f"{task.role}-{task.index}" + (f"-r{task.retry}" if task.retry else "")
        ref = f"{task.attempt_key}/{task_dir}"
        attempt = self.root / task.attempt_key
        self._stage(attempt / task_dir, task)
        with self._locked(attempt):
            if task.retry:
                self._submit_alone(attempt / task_dir, task)
            else:
                self._submit_when_staged(attempt, int(task.env.get("PAI_JOB_TASK_COUNT", "1")))
        return ref

    def _stage(self, directory: Path, task: TaskLaunch) -> None:
        (self.root / ENDED_DIR).mkdir(mode=0o700, parents=True, exist_ok=True)
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._write(directory, "bootstrap.sh", task.script)
        self._write(
            directory,
            "env.sh",
            "".join(f"export {k}={shlex.quote(v)}\n" for k, v in task.env.items()),
        )
        self._write(
            directory,
            "ports",
            "".join(f"{label} {len(ports)}\n" for label, ports in task.placement.ports.items()),
        )
        for path, content in task.files.items():
            target = directory / check_file_path(path)
            target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._write(target.parent, target.name, content)
        launch = {"role": task.role, "index": task.index, "retry": task.retry}
        launch["partition"] = self.partition_of(task)
        launch |= {"component": component_of(task, 1).__dict__}
        self._write(directory, "launch.json", json.dumps(launch))

    def _submit_when_staged(self, attempt: Path, task_count: int) -> None:
        """Submit the attempt's job once every one of its ``task_count`` tasks is staged."""
        if (attempt / JOB_ID_FILE).exists():
            return
        staged = [
            json.loads(path.read_text())
            for path in attempt.glob("*/launch.json")
            if json.loads(path.read_text())["retry"] == 0
        ]
        if len(staged) < task_count:
            return
        roles: dict[str, dict[str, Any]] = {}
        counts: dict[str, int] = {}
        for launch in staged:
            roles.setdefault(launch["role"], launch["component"])
            counts[launch["role"]] = counts.get(launch["role"], 0) + 1
        components = [Component(**{**roles[r], "tasks": counts[r]}) for r in roles]
        steps = [self._step(attempt, role) for role in roles]
        self._write(attempt, ROLES_FILE, json.dumps({role: k for k, role in enumerate(roles)}))
        self._submit(attempt, attempt.name, components, steps, staged[0]["partition"])

    def _submit_alone(self, directory: Path, task: TaskLaunch) -> None:
        if (directory / JOB_ID_FILE).exists():
            return
        name = f"{task.attempt_key}.{directory.name}"
        step = [shlex.quote(str(directory)), str(self.stop_grace_seconds)]
        components, steps = [component_of(task, 1)], [self._wrapper(directory.parent) + step]
        self._submit(directory, name, components, steps, self.partition_of(task))

    def _step(self, attempt: Path, role: str) -> list[str]:
        return [
            *self._wrapper(attempt),
            shlex.quote(str(attempt)),
            role,
            str(self.stop_grace_seconds),
        ]

    def _wrapper(self, attempt: Path) -> list[str]:
        path = attempt / "task.sh"
        if not path.exists():
            self._write(attempt, path.name, WRAPPER)
        return ["/bin/sh", shlex.quote(str(path))]

    def _submit(
        self,
        directory: Path,
        name: str,
        components: list[Component],
        steps: list[list[str]],
        partition: str,
    ) -> None:
        """Submit once: a job of this name that Slurm holds already (submitted by a launch
        that died before it wrote the id down) is taken as it is."""
        held = [job for job in self.client.queue([name]) if job.state in states.LIVE_STATES]
        if held:
            job_id = held[0].het_id
        else:
            script = batch_script(name, str(directory), components, steps, partition)
            self._write(directory, "job.sh", script)
            try:
                job_id = self.client.submit(script, str(directory))
            except SlurmError as exc:
                raise SlurmBackendError(f"Slurm refused the job: {exc}") from exc
        self._write(directory, JOB_ID_FILE, job_id)

    def partition_of(self, task: TaskLaunch) -> str:
        """The partition of the task's virtual cluster (``SLURM_VC_PARTITIONS``), else the
        default one."""
        return self.vc_partitions.get(task.env.get("PAI_VIRTUAL_CLUSTER", ""), self.partition)

    @contextmanager
    def _locked(self, attempt: Path) -> Iterator[None]:
        with (attempt / ".lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    # -- observing ------------------------------------------------------------------------------

    def observe(self, refs: list[str]) -> dict[str, Observation]:
        names = set()
        for ref in refs:
            attempt, _, task = ref.partition("/")
            names.add(attempt)
            names.add(f"{attempt}.{task}")
        queue = {(job.het_id, job.component): job for job in self.client.queue(sorted(names))}
        return {ref: self._observe_one(ref, queue) for ref in refs}

    def _observe_one(self, ref: str, queue: dict[tuple[str, int], SlurmJob]) -> Observation:
        directory = self._task_dir(ref)
        if directory is None or not directory.is_dir():
            return Observation(ref, TaskPhase.GONE)
        address = self._read_json(directory, "address.json")
        ip, node = address.get("ip", ""), address.get("node", "")
        started = self._mtime(directory, "address.json")
        job_id, component = self._job_of(directory)
        slurm = queue.get((job_id, component)) if job_id else None
        code = self._read_int(directory, "exit")
        if code is not None:
            words = describe_exit(code) if code else ""
            if (directory / "oom").exists():
                words = f"{words}; {states.OOM_KILLED}".lstrip("; ")
            elif slurm and slurm.state in ("OUT_OF_MEMORY", "TIMEOUT", "NODE_FAIL", "PREEMPTED"):
                words = f"{words}; {states.ended_without_exit(slurm.state, slurm.reason)}".lstrip(
                    "; "
                )
            return Observation(
                ref,
                TaskPhase.SUCCEEDED if code == 0 else TaskPhase.FAILED,
                ip=ip,
                node=node,
                exit_code=code,
                diagnostics=words,
                started_at=started,
                finished_at=self._mtime(directory, "exit"),
            )
        if not job_id:
            if (directory / "stop").exists():
                return Observation(
                    ref, TaskPhase.GONE, diagnostics="stopped before it was handed to Slurm"
                )
            return Observation(
                ref, TaskPhase.PENDING, diagnostics="waiting for the other tasks of its attempt"
            )
        if slurm is None:
            return Observation(
                ref,
                TaskPhase.FAILED,
                diagnostics=f"Slurm no longer knows job {job_id} and the task left no exit code",
            )
        if slurm.state in states.WAITING_STATES:
            return Observation(
                ref, TaskPhase.PENDING, diagnostics=states.waiting_reason(slurm.reason)
            )
        if slurm.state in states.LIVE_STATES:
            if not address:
                return Observation(ref, TaskPhase.PENDING, diagnostics=f"starting on {slurm.nodes}")
            return Observation(
                ref,
                TaskPhase.RUNNING,
                ip=ip,
                node=node,
                started_at=started,
                ports={k: [int(p) for p in v] for k, v in address.get("ports", {}).items()},
                awaits_peers=not (directory / "peers.env").exists(),
            )
        return Observation(
            ref,
            TaskPhase.FAILED,
            ip=ip,
            node=node,
            diagnostics=states.ended_without_exit(slurm.state, slurm.reason),
            started_at=started,
        )

    def _job_of(self, directory: Path) -> tuple[str, int]:
        """The Slurm job that runs the task in ``directory`` and its component ("" unsent)."""
        own = self._read_text(directory, JOB_ID_FILE)
        if own:
            return own, 0
        job_id = self._read_text(directory.parent, JOB_ID_FILE)
        roles = self._read_json(directory.parent, ROLES_FILE)
        launch = self._read_json(directory, "launch.json")
        return job_id, int(roles.get(launch.get("role", ""), 0))

    def watch(self, stop: threading.Event | None = None) -> Iterator[WatchedChanges]:
        """Tasks as they publish their address and as they end: each wrapper leaves a file in
        ``<root>/.ended`` (read at once through inotify where the shared file system reports
        the nodes' writes, every half second where it does not)."""
        for refs in ended_batches(self.root, stop):
            yield WatchedChanges(self.observe(refs))

    def publish_peers(self, ref: str, env: dict[str, str]) -> None:
        """Write the task's ``peers.env``: its environment with every task's address, which
        its barrier sources."""
        directory = self._task_dir(ref)
        if directory is None:
            return
        text = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())
        try:
            self._write(directory, "peers.env", text)
        except OSError as exc:  # gone, or a link the task put in its directory's place
            log.warning("could not hand %s its peers: %s", ref, exc)

    # -- stopping and cleaning up ---------------------------------------------------------------

    def stop(self, refs: list[str]) -> None:
        """A ``stop`` file for each task (its wrapper polls for it, and a task not yet sent
        to Slurm is never sent); a Slurm job whose every task stops gets SIGTERM at once,
        and each wrapper kills its task after the grace."""
        jobs: dict[str, Path] = {}
        now: set[str] = set()  # jobs signalled whatever their other tasks do
        for ref in refs:
            directory = self._task_dir(ref)
            if directory is None or not directory.is_dir():
                continue
            job_id, _ = self._job_of(directory)
            try:
                self._write(directory, "stop", "")
            except OSError as exc:  # a link the task put in its directory's place
                log.warning("no stop file for %s (%s): its whole Slurm job is signalled", ref, exc)
                now.add(job_id)
            if job_id:
                jobs[job_id] = directory
        for job_id, directory in jobs.items():
            tasks = self._job_tasks(directory)
            if job_id in now or all((d / "stop").exists() or (d / "exit").exists() for d in tasks):
                self.client.signal([job_id], "TERM")

    def cleanup(self, keep_attempt_keys: Collection[str]) -> list[str]:
        """Cancel and remove the attempts not kept (their directories and Slurm jobs)."""
        keep = set(keep_attempt_keys)
        gone = [
            p
            for p in self.root.iterdir()
            if p.is_dir() and p.name != ENDED_DIR and p.name not in keep
        ]
        if not gone:
            return []
        names = {p.name for p in gone} | {
            f"{p.name}.{t.name}" for p in gone for t in p.iterdir() if t.is_dir()
        }
        live = [
            job.het_id
            for job in self.client.queue(sorted(names))
            if job.state in states.LIVE_STATES
        ]
        self.client.signal(sorted(set(live)))
        for path in gone:
            shutil.rmtree(path, ignore_errors=True)
        return [p.name for p in gone]

    # -- logs, terminal, capacity ---------------------------------------------------------------

    def read_log(self, ref: str, stream: str, tail_bytes: int | None = None) -> bytes:
        directory = self._task_dir(ref)
        return logs.read_log(directory, stream, tail_bytes, self.root) if directory else b""

    def read_log_head(self, ref: str, stream: str, head_bytes: int) -> bytes:
        directory = self._task_dir(ref)
        return logs.read_log_head(directory, stream, head_bytes, self.root) if directory else b""

    def log_chunks(
        self, ref: str, stream: str, chunk_bytes: int = LOG_CHUNK_BYTES
    ) -> Iterator[bytes]:
        directory = self._task_dir(ref)
        return logs.log_chunks(directory, stream, chunk_bytes, self.root) if directory else iter(())

    def shell(self, ref: str) -> PtySession | None:
        """A shell in the running task's allocation (``srun --overlap --pty`` on its node),
        in its directory with its environment."""
        directory = self._task_dir(ref)
        if directory is None or (directory / "exit").exists():
            return None
        address = self._read_json(directory, "address.json")
        job_id = address.get("job", "")
        if not job_id or not address.get("node"):
            return None
        line = (
            f"cd {shlex.quote(str(directory))} && . ./env.sh && "
            "{ [ ! -f peers.env ] || . ./peers.env; } && { exec bash -i || exec sh -i; }"
        )
        argv = [
            "srun", f"--jobid={job_id}", "--overlap", "--pty", f"--nodelist={address['node']}",
            "--nodes=1", "--ntasks=1", "--export=NONE", "/bin/sh", "-c", line,
        ]  # fmt: skip
        return PtySession(ShellSpec(argv, self.client.env(), str(self.root)))

    def capacity(self) -> Capacity:
        nodes = self.nodes()
        gpus: dict[str, int] = {}
        for node in nodes.values():
            for kind, count in node.gpus.items():
                gpus[kind] = gpus.get(kind, 0) + count
        return Capacity(
            cpu=sum(n.cpu for n in nodes.values()),
            memory_mb=sum(n.memory_mb for n in nodes.values()),
            gpus=gpus,
        )

    def nodes(self) -> dict[str, Capacity]:
        return {
            node.name: Capacity(node.cpus, node.memory_mb, _gpus_of(node.gres))
            for node in self.client.nodes(self.partition)
        }

    def work_dir(self, ref: str) -> Path:
        directory = self._task_dir(ref)
        if directory is None:
            raise ValueError(f"not a task of this backend: {ref!r}")
        return directory

    def _task_dir(self, ref: str) -> Path | None:
        attempt, slash, task = ref.partition("/")
        if (
            not slash
            or not attempt
            or not task
            or "/" in task
            or attempt.startswith(".")
            or task.startswith(".")
        ):
            return None
        return self.root / attempt / task

    def _job_tasks(self, directory: Path) -> list[Path]:
        """The directories of every task that the Slurm job running ``directory``'s task runs."""
        if (directory / JOB_ID_FILE).exists():
            return [directory]  # a task run again alone
        return [
            d
            for d in directory.parent.iterdir()
            if (d / "launch.json").exists()
            and not (d / JOB_ID_FILE).exists()
            and self._read_json(d, "launch.json").get("retry") == 0
        ]

    # -- the task directories' files -----------------------------------------------------------

    def _read(self, directory: Path, name: str) -> tuple[str, datetime] | None:
        """A small file of a task's directory and when it was written; None when there is none,
        or where a symbolic link or something other than a plain file stands (the task may have
        put one there: ``logfiles.open_beneath``)."""
        try:
            parts = [*directory.relative_to(self.root).parts, name]
            fd = open_beneath(self.root, parts, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                return None
            text = f.read(SMALL_FILE_BYTES).decode("utf-8", "replace").strip()
        return text, datetime.fromtimestamp(info.st_mtime, UTC)

    def _read_text(self, directory: Path, name: str) -> str:
        found = self._read(directory, name)
        return found[0] if found else ""

    def _read_json(self, directory: Path, name: str) -> dict[str, Any]:
        text = self._read_text(directory, name)
        try:
            value = json.loads(text) if text else {}
        except json.JSONDecodeError:
            return {}
        return value if isinstance(value, dict) else {}

    def _read_int(self, directory: Path, name: str) -> int | None:
        text = self._read_text(directory, name)
        return int(text) if text.lstrip("-").isdigit() else None

    def _mtime(self, directory: Path, name: str) -> datetime | None:
        found = self._read(directory, name)
        return found[1] if found else None

    def _write(self, directory: Path, name: str, text: str) -> None:
        """Write ``directory / name`` atomically (a reader on another node never sees half a
        file), mode 600, through no symbolic link below ``root`` and onto none: a task could put
        a link where the portal writes (``peers.env``, ``stop``) to have the portal overwrite a
        file of its machine."""
        parts = directory.relative_to(self.root).parts
        folder = open_beneath(self.root, parts, os.O_RDONLY | os.O_DIRECTORY)
        try:
            tmp = f".{name}.tmp"
            with suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=folder)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            with os.fdopen(os.open(tmp, flags, 0o600, dir_fd=folder), "w") as f:
                f.write(text)
            os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
        finally:
            os.close(folder)


def _gpus_of(gres: str) -> dict[str, int]:
    """``gpu:a100:4(S:0-1),gpu:2`` -> ``{"a100": 4, "": 2}``."""
    gpus: dict[str, int] = {}
    for item in gres.split(","):
        parts = item.split("(")[0].split(":")
        if parts[0] != "gpu" or not parts[-1].isdigit():
            continue
        kind = parts[1] if len(parts) == 3 else ""
        gpus[kind] = gpus.get(kind, 0) + int(parts[-1])
    return gpus
