"""Run tasks as process groups on this machine.

Everything lives on disk under ``root``: each task has a control directory
``root/<attempt_key>/<role>-<index>[-r<retry>]`` (``taskdir``). The ref of a task is that
directory relative to ``root``, so a new backend instance (a restarted worker) finds its running
tasks again. What a task starts with (script, environment, sandbox, image) is built by
``launch``, its logs are read by ``logs``.

Each task is detached from the worker (double fork, adopted by init) and runs in a session and
process group of its own, so that stopping it reaches every process it started. A small wrapper
shell waits for it and writes its exit code atomically; a task whose processes vanish without an
exit code (killed together with its wrapper, or the machine restarted) is reported as failed.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import socket
import threading
import time
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping
from concurrent.futures import wait
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path

from backends import logfiles as logs
from backends.base import (
    LOG_CHUNK_BYTES,
    Capacity,
    Observation,
    Placement,
    TaskLaunch,
    TaskPhase,
    TaskShape,
    Usage,
    WatchedChanges,
    check_file_path,
)
from backends.ended import ended_batches, ended_marker
from backends.exits import describe_exit
from backends.local import cgroups, disk, gpus, images, limits, sandbox
from backends.local.firewall import FirewallConfig, TaskFirewall
from backends.local.launch import (
    LocalBackendError,
    environment,
    is_sandboxed,
    prepare_image,
    refuse_storages,
    sandbox_command,
    script_of,
)
from backends.local.process import (
    DEFAULT_LOG_MAX_BYTES,
    TaskRecord,
    free_ports,
    memory_mb,
    session_usage,
    spawn_detached,
    start_time_of,
)
from backends.local.taskdir import (
    IMAGE,
    SAFE_NAME,
    WORK,
    chown_tree,
    kept_until,
    parse_time,
    read_text,
    write_files,
    write_private,
)
from backends.pty import PtySession, ShellSpec

DISAPPEARED = (
    "the task's processes disappeared without an exit code (killed, or the machine restarted)"
)
SANDBOX_READY_SECONDS = 5.0  # how long a terminal waits for a task's sandbox to be set up


class LocalBackend:
    name = "local"

    def __init__(
        self,
        root: Path | str,
        host_ip: str = "127.0.0.1",
        stop_grace_seconds: float = 10.0,
        log_max_bytes: int = DEFAULT_LOG_MAX_BYTES,
        sandbox_config: sandbox.SandboxConfig | None = None,
        task_path: str = sandbox.SYSTEM_PATH,
        firewall: FirewallConfig | None = None,
        task_ports: range | None = None,
        cpus: int | None = None,
        memory_mb: int | None = None,
    ) -> None:
        self.task_path = task_path  # the tasks' PATH (not the portal's: its virtualenv)
        self.root = Path(root)
        self.sandbox = sandbox_config or sandbox.SandboxConfig()
        self.host_ip = host_ip
        self.launch_node = socket.gethostname()  # base.StartsOnLaunch: where its tasks run
        self.stop_grace_seconds = stop_grace_seconds
        self.log_max_bytes = log_max_bytes  # per stream of a task; the rest is dropped
        # What of this host tasks reach (as root): none by default, the settings' from registry.
        self.firewall = TaskFirewall(firewall or FirewallConfig(mode="off"))
        self.task_ports = task_ports  # where tasks' ports come from: any free one when None
        self.cpus = cpus  # the node's capacity as an admin set it; None: this machine's
        self.memory_mb = memory_mb

    # -- placement and launch ---------------------------------------------------------------

    def place(self, attempt_key: str, shapes: list[TaskShape]) -> list[Placement]:
        if not any(shape.port_counts for shape in shapes):  # skip reading every live task
            return [Placement(ip=self.host_ip, ports={}) for _ in shapes]
        with self._lock():
            counts = [dict(shape.port_counts) for shape in shapes]
            ports = free_ports(counts, self._taken_ports(), self.task_ports)
        return [Placement(ip=self.host_ip, ports=p) for p in ports]

    def launch(self, task: TaskLaunch) -> str:
        for part in (task.attempt_key, task.role):
            if not SAFE_NAME.fullmatch(part):
                raise ValueError(f"not a safe name for a directory: {part!r}")
        for path in task.files:
            check_file_path(path)
        refuse_storages(task)
        suffix = f"-r{task.retry}" if task.retry > 0 else ""
        ref = f"{task.attempt_key}/{task.role}-{task.index}{suffix}"
        control = self.root / ref
        with self._lock():
            sandboxed = is_sandboxed(self.sandbox, task)
            if sandboxed:
                self._refuse_unlimited(task)
            script = script_of(self.sandbox, task, sandboxed)
            old = TaskRecord.load(control / "task.json")
            if old is not None and read_text(control / "bootstrap.sh") == script:
                # Already launched (the caller retried, having died before it saved the ref):
                # the same task. Its end, should it have come, is news again, now that the
                # caller will know the ref (a pass saves it RUNNING: ``StartsOnLaunch``).
                if (control / "exit_code").exists():
                    ended_marker(self.root, ref).touch()
                return ref
            if old is not None and old.alive():
                raise LocalBackendError(f"{ref} is taken by a running task with another script")
            disk.release(control, control / WORK)  # stale: a half-done or forgotten launch
            shutil.rmtree(control, ignore_errors=True)
            work = control / WORK
            identity = (
                sandbox.identity_for(self.sandbox, task.owner_id, work) if sandboxed else None
            )
            self.firewall.admit(identity.uid if identity else None)  # before anything is made
            self.firewall.open(_ports_of(task.placement.ports), self._taken_ports)
            return self._start(task, ref, sandboxed, script, identity)

    def _start(
        self,
        task: TaskLaunch,
        ref: str,
        sandboxed: bool,
        script: str,
        identity: sandbox.TaskIdentity | None,
    ) -> str:
        """Make the task's directories, file system and files, and start it (``launch``,
        under its lock, its ports open in the firewall's table)."""
        control = self.root / ref
        work = control / WORK
        task_gpus = self._choose_gpus(task.gpu)
        # The portal's directories, private to it; as root, the task's uid may only pass
        # through them (0711) on the way to its working directory, which is its own.
        mode = 0o711 if identity else 0o700
        self.root.chmod(mode)
        control.parent.mkdir(mode=mode, exist_ok=True)  # the attempt's directory
        control.parent.chmod(mode)
        control.mkdir(mode=mode)
        work.mkdir(mode=0o700)
        disk_mb = self._disk_mb(identity)
        if disk_mb:  # the task root a mount of its own first: the sandbox detaches it
            disk.bind_root(self.root)
        # The task's file system is made while the rest is written (most of its 4.7 ms here is
        # the kernel's, which lets the launch's own 3 ms go on beside it); the task's files go
        # into it once it is there.
        mounted = disk.MOUNT_CALLS.submit(self._mount_disk, control, work, disk_mb, identity)
        try:
            write_private(control / "bootstrap.sh", script)  # secrets are rendered in
            limits.TaskLimits(
                task.memory_mb,
                task.cpu,
                self.sandbox.pids_max,
                disk_mb,
                self.sandbox.nofile,
                self.log_max_bytes,
            ).save(control)
            image = prepare_image(self.sandbox, task, control) if sandboxed else None
            env = environment(self.task_path, task, work, task_gpus, identity, sandboxed=sandboxed)
            if image is not None:  # the task sees its directory where the image has room
                env["PAI_WORK_DIR"] = env["HOME"] = images.WORK_IN_IMAGE
            command = None
            if sandboxed:
                command = sandbox_command(
                    self.sandbox,
                    self.task_path,
                    self.root,
                    task,
                    ref,
                    task_gpus,
                    identity,
                    self.hierarchy,
                    image,
                )
        finally:
            wait([mounted])  # made (or failed) before anything goes on or is undone
        mounted.result()
        write_files(work, task.files)
        if identity:
            chown_tree(work, identity.uid, identity.gid)
        ended = ended_marker(self.root, ref)
        ended.parent.mkdir(mode=0o700, exist_ok=True)  # the portal's only, as root too
        ended.unlink(missing_ok=True)  # a relaunch's own end is news again
        wrapper_pid, pid = spawn_detached(control, env, self.log_max_bytes, command)
        record = TaskRecord(
            pid=pid,
            pgid=pid,
            start_time=start_time_of(pid),
            wrapper_pid=wrapper_pid,
            wrapper_start_time=start_time_of(wrapper_pid),
            started_at=datetime.now(UTC).isoformat(),
            gpus=[gpu.index for gpu in task_gpus or []],
            ports={label: list(ports) for label, ports in task.placement.ports.items()},
            sandboxed=sandboxed,
            uid=identity.uid if identity else None,
        )
        record.save(control / "task.json")
        return ref

    def _choose_gpus(self, count: int) -> list[gpus.GPU] | None:
        """Free GPUs for a task asking for ``count``; None on a machine without GPUs."""
        if not self._gpus:
            return None
        if count <= 0:
            return []
        used = {i for rec in self._live_records() for i in rec.gpus}
        free = [gpu for gpu in self._gpus if gpu.index not in used]
        if len(free) < count:
            raise LocalBackendError(
                f"the task asks for {count} GPUs, {len(free)} of {len(self._gpus)} are free"
            )
        return free[:count]

    @cached_property
    def _gpus(self) -> list[gpus.GPU]:
        return gpus.detect(self.sandbox.proc_driver)

    # -- observation and control ------------------------------------------------------------

    def observe(self, refs: list[str]) -> dict[str, Observation]:
        return {ref: self._observe_one(ref) for ref in refs}

    def watch(self, stop: threading.Event | None = None) -> Iterator[WatchedChanges]:
        """Tasks as they end (``base.SupportsWatch``): each task's wrapper leaves a file once
        its exit code is written (``watch.ended_batches``), observed here. Until ``stop``."""
        for refs in ended_batches(self.root, stop):
            yield WatchedChanges(self.observe(refs))

    def _observe_one(self, ref: str) -> Observation:
        workdir = self._workdir_or_none(ref)
        record = TaskRecord.load(workdir / "task.json") if workdir else None
        if workdir is None or record is None:
            return Observation(ref, TaskPhase.GONE)
        ended = self._ended(ref, workdir, record)
        if ended is None and record.alive():
            if record.sandboxed and limits.killed(self.hierarchy, ref, workdir):
                cgroups.kill(self.hierarchy, ref)
                sandbox.signal_task(workdir, record, signal.SIGKILL)
            stop_at = parse_time(record.stop_requested_at)
            if stop_at and (datetime.now(UTC) - stop_at).total_seconds() > self.stop_grace_seconds:
                sandbox.signal_task(workdir, record, signal.SIGKILL)
            return self._seen(ref, record, TaskPhase.RUNNING)
        # The wrapper may have written the exit code between the two looks.
        ended = ended or self._ended(ref, workdir, record)
        return ended or self._seen(ref, record, TaskPhase.FAILED, diagnostics=DISAPPEARED)

    def _ended(self, ref: str, workdir: Path, record: TaskRecord) -> Observation | None:
        """The observation of a task whose wrapper recorded its exit code, else None."""
        path = workdir / "exit_code"
        try:
            text = path.read_text().strip()
            finished_at = datetime.fromtimestamp(path.stat().st_mtime, UTC)
        except FileNotFoundError:
            return None
        if not text:
            return None  # made, not written yet: the wrapper writes it in place (``wrapper.c``)
        try:
            code = int(text)
        except ValueError:
            return self._seen(
                ref, record, TaskPhase.FAILED, f"unreadable exit code {text!r}", None, finished_at
            )
        # A task the kernel killed a process of for a limit failed, whatever its last command
        # made of it (on cgroup v2 the kernel kills it whole; on v1 the next pass would).
        if code == 0 and not (record.sandboxed and limits.killed(self.hierarchy, ref, workdir)):
            return self._seen(ref, record, TaskPhase.SUCCEEDED, "", 0, finished_at)
        diagnostics = describe_exit(code)
        pulled = read_text(workdir / IMAGE)
        if pulled and (failure := images.pull_failure(workdir, pulled)):
            diagnostics = failure
        if record.sandboxed:
            diagnostics = limits.end_reason(self.hierarchy, ref, workdir, diagnostics)
        if record.stop_requested_at:
            diagnostics += " after a stop request"
        return self._seen(ref, record, TaskPhase.FAILED, diagnostics, code, finished_at)

    def _seen(
        self,
        ref: str,
        record: TaskRecord,
        phase: TaskPhase,
        diagnostics: str = "",
        exit_code: int | None = None,
        finished_at: datetime | None = None,
    ) -> Observation:
        return Observation(
            ref,
            phase,
            ip=self.host_ip,
            node=self.launch_node,
            exit_code=exit_code,
            diagnostics=diagnostics,
            started_at=parse_time(record.started_at),
            finished_at=finished_at,
        )

    def stop(self, refs: list[str]) -> None:
        for ref in refs:
            workdir = self._workdir_or_none(ref)
            record = TaskRecord.load(workdir / "task.json") if workdir else None
            if workdir is None or record is None or (workdir / "exit_code").exists():
                continue
            if not record.alive():
                continue
            if record.stop_requested_at is None:  # the first request starts the grace period
                record.stop_requested_at = datetime.now(UTC).isoformat()
                record.save(workdir / "task.json")
            if record.sandboxed:  # first: a sandbox whose bootstrap has not started sees it
                sandbox.request_stop(workdir / WORK)
            sandbox.signal_task(workdir, record, signal.SIGTERM)

    def read_log(self, ref: str, stream: str, tail_bytes: int | None = None) -> bytes:
        return logs.read_log(self._workdir(ref), stream, tail_bytes)

    def read_log_head(self, ref: str, stream: str, head_bytes: int) -> bytes:
        return logs.read_log_head(self._workdir(ref), stream, head_bytes)

    def log_chunks(
        self, ref: str, stream: str, chunk_bytes: int = LOG_CHUNK_BYTES
    ) -> Iterator[bytes]:
        return logs.log_chunks(self._workdir(ref), stream, chunk_bytes)

    def shell(self, ref: str) -> PtySession | None:
        """A login-less shell in the task's directory with the task's own environment (read
        from its main process), as its own session with a pty of this machine as controlling
        terminal."""
        spec = self._shell_spec(ref)
        return None if spec is None else PtySession(spec)

    def _shell_spec(self, ref: str) -> ShellSpec | None:
        workdir = self._workdir_or_none(ref)
        record = TaskRecord.load(workdir / "task.json") if workdir else None
        if workdir is None or record is None or record.pid is None or not record.alive():
            return None
        shell_pid = record.pid
        if record.sandboxed:  # the shell joins the task's sandbox, as the task's uid
            deadline = time.monotonic() + SANDBOX_READY_SECONDS  # a task that just started
            while not (shell_pid := sandbox.sandbox_init(workdir, record.pid) or 0) or not (
                sandbox.namespaces_ready(shell_pid)
            ):
                if time.monotonic() > deadline or not record.alive():
                    return None
                time.sleep(0.05)
        try:
            raw = Path(f"/proc/{shell_pid}/environ").read_bytes()
        except OSError:
            return None
        env = dict(
            item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item
        )
        env["TERM"] = "xterm-256color"
        if record.sandboxed:
            image = None
            if read_text(workdir / IMAGE):  # the shell lands in the task's image, as the task did
                deadline = time.monotonic() + SANDBOX_READY_SECONDS
                while not (inner := sandbox.image_process(shell_pid)):
                    if time.monotonic() > deadline or not record.alive():
                        return None
                    time.sleep(0.05)
                image = (inner, images.WORK_IN_IMAGE)
            argv = sandbox.shell_command(shell_pid, record.uid, workdir / WORK, image)
            return ShellSpec(argv=argv, env=env, cwd=str(workdir / WORK))
        shell = "/bin/bash" if Path("/bin/bash").exists() else "/bin/sh"
        return ShellSpec(argv=["setsid", "-c", shell, "-i"], env=env, cwd=str(workdir / WORK))

    def usage(self, refs: list[str]) -> dict[str, Usage]:
        """What each running task of ``refs`` uses: a sandboxed task's cgroup counts its CPU
        time and memory (``cgroups.usage``), an unsandboxed one's processes are summed from
        /proc (``session_usage``); its GPUs are read with one nvidia-smi call for all."""
        running: dict[str, TaskRecord] = {}
        for ref in refs:
            workdir = self._workdir_or_none(ref)
            record = TaskRecord.load(workdir / "task.json") if workdir else None
            if workdir and record and not (workdir / "exit_code").exists() and record.alive():
                running[ref] = record
        if not running:
            return {}
        plain = [r.pgid for r in running.values() if not r.sandboxed and r.pgid is not None]
        sessions = session_usage(plain) if plain else {}
        cards = gpus.utilization() if any(r.gpus for r in running.values()) else {}
        found = {}
        for ref, record in running.items():
            if record.sandboxed and self.hierarchy.version:
                cpu, memory = cgroups.usage(self.hierarchy, ref)
            else:
                cpu, memory = sessions.get(record.pgid or -1, (None, None))
            readings = [cards[i] for i in record.gpus if i in cards]
            utils = [u for u, _ in readings if u is not None]
            used = [m for _, m in readings if m is not None]
            found[ref] = Usage(
                cpu_seconds=cpu,
                memory_bytes=memory,
                gpu_util=sum(utils) / len(utils) if utils else None,
                gpu_memory_bytes=sum(used) if used else None,
            )
        return found

    def capacity(self) -> Capacity:
        return Capacity(
            cpu=self.cpus or os.cpu_count() or 1,
            memory_mb=self.memory_mb or memory_mb(),
            gpus=dict(Counter(gpu.name for gpu in self._gpus)),
        )

    # -- cleanup ----------------------------------------------------------------------------

    def cleanup(self, keep_attempt_keys: Collection[str]) -> list[str]:
        """Delete the directories of attempts not in ``keep_attempt_keys``; return the keys of
        those it removed (or killed) something of.

        A task directory with a ``.keep_until`` (epoch seconds; the debug plugin) in the future
        stays, and so does its attempt's directory. A task still running in an attempt not kept
        (an unknown job's) is killed now and its directory removed by a later cleanup.
        """
        keep, removed, now = set(keep_attempt_keys), [], time.time()
        with self._lock():
            for attempt in sorted(self.root.iterdir()):
                if (
                    not attempt.is_dir()
                    or attempt.name in keep
                    or not SAFE_NAME.fullmatch(attempt.name)
                ):
                    continue
                left = False
                for workdir in sorted(p for p in attempt.iterdir() if p.is_dir()):
                    if kept_until(workdir / WORK) > now:
                        left = True
                        continue
                    record = TaskRecord.load(workdir / "task.json")
                    ended = (workdir / "exit_code").exists()  # its wrapper's last step
                    if record is not None and not ended and record.alive():
                        sandbox.signal_task(workdir, record, signal.SIGKILL)
                        left = True
                        removed.append(attempt.name)
                        continue
                    sandbox.remove_gates(f"{attempt.name}/{workdir.name}")
                    cgroups.remove(self.hierarchy, f"{attempt.name}/{workdir.name}")
                    disk.release(workdir, workdir / WORK)
                    shutil.rmtree(workdir, ignore_errors=True)
                    removed.append(attempt.name)
                if not left:
                    shutil.rmtree(attempt, ignore_errors=True)
                    removed.append(attempt.name)
            disk.unbind_root(self.root)  # once no task file system is left under it
            self._fence()  # the firewall heals here too, or goes
        return sorted(set(removed))

    def fence(self) -> None:
        """The task firewall's table as the running tasks need it: none when none runs (the
        portal stops: nothing is left of it on this host)."""
        with self._lock():
            self._fence()

    def _fence(self) -> None:
        live = list(self._live_records())
        self.firewall.sync(_ports_in(live), bool(live))

    # -- helpers ----------------------------------------------------------------------------

    @cached_property
    def host_limits(self) -> limits.HostLimits:
        """What the kernel can limit for tasks on this host (read once)."""
        return limits.host_limits(self.sandbox)

    @property
    def hierarchy(self) -> cgroups.Hierarchy:
        return self.host_limits.hierarchy

    def describe_limits(self) -> list[str]:
        """What holds for tasks on this host, a line each (start-up, admin and job pages)."""
        if not self.sandbox.enabled:
            return []
        return [*self.host_limits.describe(self.sandbox), self.firewall.describe()]

    def unlimited(self) -> list[str]:
        """The limits a task would run without on this host (all of them unsandboxed)."""
        if not self.sandbox.enabled:
            return ["memory", "cpu", "pids", "disk", "network"]
        return self.host_limits.unlimited(self.sandbox)

    def _refuse_unlimited(self, task: TaskLaunch) -> None:
        """Other users' tasks never run silently without a kernel limit: refused unless an
        admin allowed it (LOCAL_REQUIRE_LIMITS=false); an admin's own tasks run."""
        missing = self.unlimited()
        if missing and self.sandbox.require_limits and not task.owner_is_admin:
            raise LocalBackendError(
                f"this machine cannot limit the {', '.join(missing)} of a task "
                f"({'; '.join(self.describe_limits())}), and other users' tasks do not run "
                "unlimited: an admin runs the portal as root on a host with cgroups (v2 or "
                "v1) and loop devices, or allows it with LOCAL_REQUIRE_LIMITS=false"
            )

    def _disk_mb(self, identity: sandbox.TaskIdentity | None) -> int:
        """The size of the task's working directory as a file system of its own (as root, for
        a task of its own uid): LOCAL_TASK_DISK_MB, or 0 where it stays a plain directory."""
        if identity is None or self.sandbox.disk_mb <= 0 or not self.host_limits.disk:
            return 0
        return self.sandbox.disk_mb

    def _mount_disk(
        self, control: Path, work: Path, size_mb: int, identity: sandbox.TaskIdentity | None
    ) -> None:
        if size_mb and identity is not None:
            owner = (identity.uid, identity.gid)
            disk.mount_limited(control, work, size_mb, owner, self.root)

    def work_dir(self, ref: str) -> Path:
        """The task's own directory (``PAI_WORK_DIR``), in its control directory."""
        return self._workdir(ref) / WORK

    def _workdir(self, ref: str) -> Path:
        """The working directory of ``ref``; ValueError when the ref would leave ``root``."""
        parts = ref.split("/")
        if len(parts) != 2 or not all(SAFE_NAME.fullmatch(p) for p in parts):
            raise ValueError(f"not a local task ref: {ref!r}")
        return self.root / parts[0] / parts[1]

    def _workdir_or_none(self, ref: str) -> Path | None:
        try:
            return self._workdir(ref)
        except ValueError:
            return None

    def _taken_ports(self) -> set[int]:
        """The ports of the running tasks."""
        return _ports_in(self._live_records())

    def _live_records(self) -> Iterator[TaskRecord]:
        for path in self.root.glob("*/*/task.json"):
            if (path.parent / "exit_code").exists():
                continue  # finished: the cheap check first, as finished tasks pile up
            record = TaskRecord.load(path)
            if record and record.alive():
                yield record

    @contextmanager
    def _lock(self) -> Iterator[None]:
        """Serialise placement and launches under ``root`` (across worker processes too)."""
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        with (self.root / ".lock").open("a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)


def _ports_of(ports: Mapping[str, Collection[int]]) -> set[int]:
    return {port for label_ports in ports.values() for port in label_ports}


def _ports_in(records: Iterable[TaskRecord]) -> set[int]:
    """The ports of these tasks, all labels together."""
    return {port for record in records for port in _ports_of(record.ports)}
