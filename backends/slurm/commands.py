"""Slurm's own client commands, run on the portal's machine as a submit host.

Why the commands and not ``slurmrestd``: every Slurm site has the commands on its login nodes,
configured by one ``slurm.conf`` and a munge key; ``slurmrestd`` is optional, versioned per
release (its OpenAPI plugins change between 21.08, 22.05 and 23.02) and needs JWT set up. The
portal's machine is made a submit host the way a login node is (README "Slurm"), and
``SLURM_CONF`` points the commands at the site's configuration.

Each call gets a clean environment (``PATH``, ``SLURM_CONF``, ``HOME``, ``LANG``): the portal's
own variables (its secret key, the database's address) never reach Slurm, which by default
copies the submitting environment into the job. A command that cannot reach the controller
raises ``BackendUnavailable`` (nothing known to have failed: the pass tries again); any other
failure raises ``SlurmError`` with Slurm's own words.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from backends.base import BackendUnavailable

# What Slurm's clients print when the controller cannot be reached (slurm_strerror's texts).
UNREACHABLE = re.compile(
    r"Unable to contact slurm controller|Socket timed out|Connection refused|"
    r"Communication connection failure|Zero Bytes were transmitted|"
    r"Slurm backup controller in standby mode|Munge|munge"
)
SEP = "\x1f"  # between the fields of squeue's and sinfo's output (never in a job name)


@dataclass(frozen=True)
class Account:
    """A Unix account of the cluster that jobs run as (known by the same ids on every node)."""

    name: str
    uid: int
    gid: int


def as_account(account: Account | None) -> list[str]:
    """The options of ``sbatch`` and ``srun`` that run a job (or step) as ``account``."""
    return [f"--uid={account.uid}", f"--gid={account.gid}"] if account else []


class SlurmError(RuntimeError):
    """Slurm refused what was asked; the message is Slurm's."""


@dataclass(frozen=True)
class SlurmJob:
    """One job (or one component of a heterogeneous job) as ``squeue`` lists it."""

    job_id: str  # the component's own id (squeue's %A), what ``srun --jobid`` takes
    het_id: str  # the heterogeneous job's id (the first component's), else job_id
    component: int  # 0 for a plain job
    name: str
    state: str  # PENDING, RUNNING, COMPLETED, OUT_OF_MEMORY, ...
    reason: str  # why it waits, or how it ended ("None" when there is nothing to say)
    nodes: str  # the nodes it runs on, Slurm's host list ("n[1-2]")


# squeue's fields, in SlurmJob's order: %A the component's id, %i "het+offset" or the id,
# %j the name, %T the state, %r the reason, %N the nodes.
QUEUE_FORMAT = SEP.join(["%A", "%i", "%j", "%T", "%r", "%N"])


@dataclass(frozen=True)
class SlurmNode:
    name: str
    cpus: int
    memory_mb: int
    gres: str  # "gpu:a100:4,..." or "(null)"
    state: str


NODE_FORMAT = SEP.join(["%N", "%c", "%m", "%G", "%T"])


class SlurmClient:
    """Runs the commands with ``conf`` as ``SLURM_CONF`` ("" = the commands' default)."""

    def __init__(self, conf: str = "", timeout: float = 30.0, bin_dir: str = "") -> None:
        self.conf = conf
        self.timeout = timeout
        self.bin_dir = bin_dir

    def env(self) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", "/"),
            "LANG": "C.UTF-8",
        }
        if self.conf:
            env["SLURM_CONF"] = self.conf
        return env

    def run(self, argv: Sequence[str], stdin: str | None = None) -> str:
        """The command's output; BackendUnavailable or SlurmError when it fails."""
        command = [os.path.join(self.bin_dir, argv[0]) if self.bin_dir else argv[0], *argv[1:]]
        try:
            done = subprocess.run(  # noqa: S603 - argv is built here, never a shell line
                command,
                input=stdin,
                capture_output=True,
                text=True,
                timeout=self.timeout,
                env=self.env(),
                check=False,
            )
        except FileNotFoundError as exc:
            raise BackendUnavailable(f"{argv[0]} is not installed on this machine") from exc
        except subprocess.TimeoutExpired as exc:
            raise BackendUnavailable(f"{argv[0]} did not answer in {self.timeout:g} s") from exc
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip()
            if UNREACHABLE.search(said):
                raise BackendUnavailable(f"{argv[0]}: {said}")
            said = said or f"exited with code {done.returncode}"
            raise SlurmError(said if said.startswith(argv[0]) else f"{argv[0]}: {said}")
        return done.stdout

    def submit(self, script: str, directory: str, run_as: Account | None = None) -> str:
        """Submit a batch script (read from stdin), as ``run_as`` when given (root only); the
        new job's id (the first component's)."""
        argv = ["sbatch", "--parsable", f"--chdir={directory}", *as_account(run_as)]
        out = self.run(argv, stdin=script)
        return out.strip().split(";")[0]

    def queue(self, names: Sequence[str] | None = None) -> list[SlurmJob]:
        """Every job the controller still holds (finished ones for ``MinJobAge``), of
        ``names`` only when given."""
        argv = ["squeue", "--noheader", "--states=all", f"--format={QUEUE_FORMAT}"]
        if names is not None:
            if not names:
                return []
            argv.append(f"--name={','.join(names)}")
        jobs = []
        for line in self.run(argv).splitlines():
            fields = line.split(SEP)
            if len(fields) != 6:
                continue
            job_id, het, name, state, reason, nodes = (f.strip() for f in fields)
            het_id, plus, offset = het.partition("+")
            jobs.append(
                SlurmJob(
                    job_id=job_id,
                    het_id=het_id if plus else job_id,
                    component=int(offset) if plus and offset.isdigit() else 0,
                    name=name,
                    state=state.split()[0] if state else "",
                    reason=reason,
                    nodes=nodes,
                )
            )
        return jobs

    def signal(self, job_ids: Sequence[str], signal_name: str | None = None) -> None:
        """``scancel`` the jobs: a signal to their steps (the tasks) when ``signal_name`` is
        given, else cancelled outright (Slurm kills what is left after its ``KillWait``)."""
        if not job_ids:
            return
        argv = ["scancel", *([f"--signal={signal_name}"] if signal_name else []), *job_ids]
        try:
            self.run(argv)
        except SlurmError as exc:
            if "Invalid job id" not in str(exc) and "already completing" not in str(exc):
                raise  # a job that ended meanwhile is no failure of the stop

    def nodes(self, partition: str = "") -> list[SlurmNode]:
        argv = ["sinfo", "--noheader", "--Node", f"--format={NODE_FORMAT}"]
        if partition:
            argv.append(f"--partition={partition}")
        nodes: dict[str, SlurmNode] = {}
        for line in self.run(argv).splitlines():
            fields = [f.strip() for f in line.split(SEP)]
            if len(fields) != 5 or not fields[1].isdigit():
                continue
            name, cpus, memory, gres, state = fields
            memory_mb = int(memory) if memory.isdigit() else 0
            nodes[name] = SlurmNode(name, int(cpus), memory_mb, gres, state)
        return list(nodes.values())

    def expand(self, hostlist: str) -> list[str]:
        """Slurm's host list (``n[1-3]``) as names."""
        if not hostlist or hostlist in ("(null)", "None assigned"):
            return []
        if "[" not in hostlist:
            return hostlist.split(",")
        return self.run(["scontrol", "show", "hostnames", hostlist]).split()
