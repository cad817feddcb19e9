"""The Slurm backend: a job attempt is one Slurm job on a site's cluster (``script``).

The portal's machine is a submit host (``commands``) and shares a directory with the nodes
(``root``, the same path everywhere: an HPC site's shared file system). Each task has its
directory there, ``<root>/<attempt>/<role>-<index>[-r<retry>]``, which holds what it starts
with (the bootstrap, its secret files, its ports), what it says (``address.json``,
``stdout.log``, ``stderr.log``, ``exit``) and what the portal says to it (``peers.env``, a
``stop``). A ref is ``<attempt>/<task directory>``. The task's account can write there, so the
portal's own records of it (its launch, the Slurm job ids, the batch scripts) live in the
attempt's directory, which only the portal writes, and every file is read and written as one
the task may have tampered with (``files``).

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
import pwd
import shlex
import shutil
import threading
from collections.abc import Collection, Iterator
from contextlib import contextmanager
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
from backends.ended import ENDED_DIR, ended_batches, ended_marker
from backends.exits import describe_exit
from backends.pty import PtySession, ShellSpec
from backends.slurm import states
from backends.slurm.commands import Account, SlurmClient, SlurmError, SlurmJob, as_account
from backends.slurm.files import SharedDir
from backends.slurm.script import WRAPPER, Component, batch_script, component_of

log = logging.getLogger(__name__)
# The portal's own records live in the attempt's directory, which only the portal writes: a
# task's directory is its account's, and what a task could edit there (an account to open its
# terminal as, a job id to cancel) must not come from there.
JOB_ID_FILE = "slurm-job"  # the Slurm job of the attempt; "<task>.slurm-job": of a task run again
ROLES_FILE = "roles.json"  # role -> component of the attempt's job
LAUNCH = ".launch.json"  # "<task>.launch.json": role, index, retry, partition, account


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
        accounts: dict[str, str] | None = None,
    ) -> None:
        self.root = Path(root)
        self.files = SharedDir(self.root)
        self.client = client
        self.partition = partition
        self.vc_partitions = dict(vc_partitions or {})  # a virtual cluster -> its partition
        self.stop_grace_seconds = stop_grace_seconds
        self.accounts = dict(accounts or {})  # a portal user -> the Unix account jobs run as

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
        account = self.account_of(task.env.get("PAI_USER_NAME", ""))
        self._stage(attempt, attempt / task_dir, task, account)
        with self._locked(attempt):
            if task.retry:
                self._submit_alone(attempt / task_dir, task, account)
            else:
                count = int(task.env.get("PAI_JOB_TASK_COUNT", "1"))
                self._submit_when_staged(attempt, count, account)
        return ref

    def account_of(self, user: str) -> Account | None:
        """The Unix account ``user``'s jobs run as (``SLURM_USER_ACCOUNTS``: a name known to
        this machine, or ``uid[:gid]``); None: the portal's own."""
        value = self.accounts.get(user)
        if value is None:
            return None
        if os.geteuid() != 0:
            raise SlurmBackendError(
                "SLURM_USER_ACCOUNTS: only a portal running as root on its submit host can "
                f"submit jobs as {value}"
            )
        uid, _, gid = value.partition(":")
        if uid.isdigit() and (gid.isdigit() or not gid):
            return Account(value, int(uid), int(gid or uid))
        try:
            entry = pwd.getpwnam(value)
        except KeyError:
            raise SlurmBackendError(f"SLURM_USER_ACCOUNTS: no account {value!r} here") from None
        return Account(value, entry.pw_uid, entry.pw_gid)

    def runs_as(self, user: str) -> str:
        """Who ``user``'s tasks run as, in words (the job page says it)."""
        value = self.accounts.get(user)
        if value is None:
            return f"the portal's own account ({pwd.getpwuid(os.geteuid()).pw_name})"
        return f"the account {value}"

    def _directory(self, path: Path, mode: int, account: Account | None = None) -> None:
        path.mkdir(mode=mode, parents=True, exist_ok=True)
        path.chmod(mode)  # whatever the umask
        if account:
            os.chown(path, account.uid, account.gid)

    def _stage(
        self, attempt: Path, directory: Path, task: TaskLaunch, account: Account | None
    ) -> None:
        # Every account may pass through the root and an attempt, and leave a file in
        # .ended (sticky: none removes another's); only a task's own account enters its
        # directory.
        self._directory(self.root, 0o711)
        self._directory(self.root / ENDED_DIR, 0o1733)
        self._directory(attempt, 0o711)
        self._directory(directory, 0o700, account)
        self.files.write(directory, "bootstrap.sh", task.script)
        self.files.write(
            directory,
            "env.sh",
            "".join(f"export {k}={shlex.quote(v)}\n" for k, v in task.env.items()),
        )
        self.files.write(
            directory,
            "ports",
            "".join(f"{label} {len(ports)}\n" for label, ports in task.placement.ports.items()),
        )
        for path, content in task.files.items():
            target = directory / check_file_path(path)
            self._directory(target.parent, 0o700, account)
            self.files.write(target.parent, target.name, content)
        launch = {"role": task.role, "index": task.index, "retry": task.retry}
        launch["partition"] = self.partition_of(task)
        launch["account"] = account.__dict__ if account else None
        launch |= {"component": component_of(task, 1).__dict__}
        self.files.write(attempt, directory.name + LAUNCH, json.dumps(launch))

    def _submit_when_staged(self, attempt: Path, task_count: int, account: Account | None) -> None:
        """Submit the attempt's job once every one of its ``task_count`` tasks is staged."""
        if (attempt / JOB_ID_FILE).exists():
            return
        staged = [
            launch
            for path in attempt.glob("*" + LAUNCH)
            if (launch := self.files.read_json(attempt, path.name)).get("retry") == 0
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
        self.files.write(attempt, ROLES_FILE, json.dumps({role: k for k, role in enumerate(roles)}))
        self._directory(attempt / "batch", 0o700, account)  # the batch script's own output
        partition = staged[0]["partition"]
        self._submit(attempt, "", attempt.name, components, steps, partition, account)

    def _submit_alone(self, directory: Path, task: TaskLaunch, account: Account | None) -> None:
        attempt = directory.parent
        if (attempt / f"{directory.name}.{JOB_ID_FILE}").exists():
            return
        name = f"{task.attempt_key}.{directory.name}"
        step = [shlex.quote(str(directory)), str(self.stop_grace_seconds)]
        components, steps = [component_of(task, 1)], [self._wrapper(attempt) + step]
        partition = self.partition_of(task)
        self._submit(attempt, directory.name, name, components, steps, partition, account)

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
            self.files.write(attempt, path.name, WRAPPER, mode=0o644)  # no secret in it
        return ["/bin/sh", shlex.quote(str(path))]

    def _submit(
        self,
        attempt: Path,
        alone: str,
        name: str,
        components: list[Component],
        steps: list[list[str]],
        partition: str,
        account: Account | None,
    ) -> None:
        """Submit the attempt's job, or the job of its task ``alone`` when given, once: a job
        of this name that Slurm holds already (submitted by a launch that died before it wrote
        the id down) is taken as it is."""
        prefix = f"{alone}." if alone else ""
        held = [job for job in self.client.queue([name]) if job.state in states.LIVE_STATES]
        if held:
            job_id = held[0].het_id
        else:
            output = attempt / alone if alone else attempt / "batch"
            tasks = (
                [alone] if alone else [p.name.removesuffix(LAUNCH) for p in self._records(attempt)]
            )
            ends = [
                (str(attempt / task), str(ended_marker(self.root, f"{attempt.name}/{task}")))
                for task in tasks
            ]
            script = batch_script(name, str(output), components, steps, partition, ends)
            self.files.write(attempt, prefix + "job.sh", script)
            try:
                job_id = self.client.submit(script, str(attempt), run_as=account)
            except SlurmError as exc:
                raise SlurmBackendError(f"Slurm refused the job: {exc}") from exc
        self.files.write(attempt, prefix + JOB_ID_FILE, job_id)

    def _records(self, attempt: Path) -> list[Path]:
        """The launch records of the attempt's first run of each task (not the retries)."""
        return [
            path
            for path in sorted(attempt.glob("*" + LAUNCH))
            if self.files.read_json(attempt, path.name).get("retry") == 0
        ]

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
        address = self.files.read_json(directory, "address.json")
        ip, node = address.get("ip", ""), address.get("node", "")
        started = self.files.mtime(directory, "address.json")
        job_id, component = self._job_of(directory)
        slurm = queue.get((job_id, component)) if job_id else None
        code = self.files.read_int(directory, "exit")
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
                finished_at=self.files.mtime(directory, "exit"),
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
        lost = (directory / "lost").exists()  # its step ended without it (batch_script)
        # The batch script goes on past a lost step and may have ended by the time this looks.
        if lost and (slurm.state in states.LIVE_STATES or slurm.state == "COMPLETED"):
            return Observation(ref, TaskPhase.FAILED, ip=ip, node=node, diagnostics=states.LOST)
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
        attempt = directory.parent
        own = self.files.read_text(attempt, f"{directory.name}.{JOB_ID_FILE}")
        if own:
            return own, 0
        job_id = self.files.read_text(attempt, JOB_ID_FILE)
        roles = self.files.read_json(attempt, ROLES_FILE)
        launch = self.files.read_json(attempt, directory.name + LAUNCH)
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
            self.files.write(directory, "peers.env", text)
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
                self.files.write(directory, "stop", "")
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
        if not self.root.is_dir():
            return []
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
        # The job from the portal's own records, not from what the task wrote: a task could
        # name another job in its address.json.
        het_id, component = self._job_of(directory)
        own = (directory.parent / f"{directory.name}.{JOB_ID_FILE}").exists()
        name = f"{directory.parent.name}.{directory.name}" if own else directory.parent.name
        running = [
            job.job_id
            for job in self.client.queue([name])
            if (job.het_id, job.component) == (het_id, component) and job.state == "RUNNING"
        ]
        node = self.files.read_json(directory, "address.json").get("node", "")
        if not het_id or not running or not isinstance(node, str) or not node:
            return None
        launch = self.files.read_json(directory.parent, directory.name + LAUNCH)
        account = Account(**launch["account"]) if launch.get("account") else None
        line = (
            'PATH="${PATH:-/usr/local/bin:/usr/bin:/bin}"; export PATH; '
            f"cd {shlex.quote(str(directory))} && . ./env.sh && "
            "{ [ ! -f peers.env ] || . ./peers.env; } && "
            "{ ! command -v bash >/dev/null || exec bash -i; } && exec sh -i"
        )
        argv = [
            "srun", f"--jobid={running[0]}", *as_account(account), "--overlap", "--pty",
            f"--nodelist={node}", "--nodes=1", "--ntasks=1", "--export=NONE",
            "/bin/sh", "-c", line,
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
        attempt = directory.parent
        if (attempt / f"{directory.name}.{JOB_ID_FILE}").exists():
            return [directory]  # a task run again alone
        return [attempt / path.name.removesuffix(LAUNCH) for path in self._records(attempt)]


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
