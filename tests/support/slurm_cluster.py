"""A real multi-node Slurm cluster in Docker containers, with this host as its submit host.

The portal's Slurm backend runs on the host and calls Slurm's client commands there (``sbatch``,
``squeue``, ``scontrol``, ``scancel``, ``srun``: Debian's ``slurm-client``, ``make
slurm-client``), as it would on a site's login node. The cluster is three containers of one
image (``slurm/slurm.Dockerfile``: Debian 12's Slurm 22.05, the host client's version) on a
Docker network of their own: ``ctl`` runs slurmctld, ``n1`` and ``n2`` run slurmd (2 CPUs and
1000 MB each: they oversubscribe a 2-core machine, which only makes them slower). A host
directory is mounted in both compute nodes at the same absolute path, as a site's shared file
system: tasks write their logs there and the host reads them.

Everything is derived from ``TEST_SLOT`` (0-9), so that two test runs share the machine: the
network ``portal-slurm<slot>`` on 10.231.<slot>.0/24, the containers ``portal-slurm<slot>-<node>``
and the directory ``/var/lib/portal-slurm-test/<slot>``. A start first removes what an
interrupted run of the same slot left there.

Munge: one key per cluster, generated in the cluster's directory. The host's /etc/munge and
/etc/slurm stay untouched (``bench/slurm-setup.sh`` uses them): a munged of the cluster's own
runs on the host with its own socket, key, pid, seed and log files, and the host's clients read a
slurm.conf of the cluster's own (``SLURM_CONF``) whose ``AuthInfo=socket=...`` points Slurm's
auth/munge at that socket. The containers run munged on its default socket and read the same
slurm.conf without that line (``/etc/slurm`` is mounted from the cluster's directory).

Memory is a consumable (select/cons_tres, CR_CPU_Memory; ``DefMemPerCPU`` for jobs that ask
none, which would otherwise take a whole node's) and is enforced with cgroups: proctrack/cgroup
and task/cgroup with ``ConstrainRAMSpace=yes``, as sites do. This host mounts cgroup v1 and
refuses ``--privileged`` (its capability bounding set lacks CAP_SYS_RESOURCE: runc fails
"unable to apply caps"), so the containers get every other capability, no seccomp or AppArmor
profile and a private cgroup namespace, and ``entrypoint.sh`` mounts the hierarchies again,
writable, with the container's cgroup as their root: the two slurmd on this host do not share a
tree. A process over its job's ``--mem-per-cpu`` x CPUs is killed by the kernel in its step's
cgroup at once and slurmstepd reports the OOM event: the job ends ``OUT_OF_MEMORY`` when its
batch script was killed, ``srun`` prints "Out Of Memory" when a step was (what Slurm prints
exactly: tests/slurm/test_cluster.py). The fallback, jobacct_gather/linux's OverMemoryKill
(which polls RSS, at best every second), was not needed and is not tried here.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.compose import BASE, BUILDER, ensure_base, ensure_dockerd, run

IMAGE_DIR = Path(__file__).with_name("slurm")
IMAGE = "portal-ci/slurm"
ROOT = Path("/var/lib/portal-slurm-test")
NODES = ("n1", "n2")
PARTITION = "batch"
NODE_CPUS = 2
NODE_MEMORY_MB = 1000
GPU_TYPE = "tesla"
NODE_GPUS = 2  # entrypoint.sh makes /dev/nvidia0 and /dev/nvidia1
DEF_MEM_PER_CPU_MB = 100  # a job that asks for no memory takes this, not the whole node's

CLIENTS = ("sbatch", "srun", "squeue", "scontrol", "scancel", "sinfo", "munged")


def slot() -> int:
    """The run's TEST_SLOT (tests/conftest.py): two runs on this machine, two clusters."""
    return int(os.environ.get("TEST_SLOT", "0"))


def missing_tools() -> list[str]:
    """What this machine lacks to run the cluster (``make docker slurm-client`` installs it)."""
    needed = ["dockerd", BUILDER, "mmdebstrap", *CLIENTS]
    missing = [tool for tool in needed if shutil.which(tool) is None]
    if os.geteuid() != 0:
        missing.append("root (dockerd)")
    return missing


@dataclass
class SlurmCluster:
    """A running cluster, as the host's clients see it: ``env`` (``SLURM_CONF``) points them
    at it. ``shared`` is mounted at the same path in every compute node."""

    conf: Path
    env: dict[str, str]
    shared: Path
    nodes: list[str]
    node_ips: dict[str, str]
    partition: str
    slot: int = 0
    containers: dict[str, str] = field(default_factory=dict)  # node (and "ctl") -> container

    def exec(self, node: str, argv: list[str], timeout: float = 60) -> str:
        """``argv``'s output, run as root in ``node``'s container (``ctl``, ``n1``, ``n2``)."""
        return run([BUILDER, "exec", self.containers[node], *argv], timeout=timeout)

    def logs(self, node: str) -> str:
        """The daemon's log of ``node``'s container (slurmctld's for ``ctl``)."""
        done = subprocess.run(
            [BUILDER, "logs", "--tail", "300", self.containers[node]],
            capture_output=True,
            text=True,
            check=False,
        )
        return done.stdout + done.stderr

    def client(self, *argv: str, timeout: float = 60) -> str:
        """A Slurm client command run on the host against this cluster; its output. It runs in
        the shared directory: a job's or step's working directory is by default the one its
        client ran in, and slurmstepd goes to /tmp (with an error in the output) when the node
        has no such directory."""
        env = {**os.environ, **self.env}
        return run(list(argv), timeout=timeout, env=env, cwd=self.shared)


@dataclass(frozen=True)
class Layout:
    """Names, addresses and paths of a slot's cluster."""

    slot: int

    @property
    def network(self) -> str:
        return f"portal-slurm{self.slot}"

    @property
    def subnet(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(f"10.231.{self.slot}.0/24")

    def ip(self, host: str) -> str:
        return str(self.subnet[10 + ("ctl", *NODES).index(host)])

    def container(self, host: str) -> str:
        return f"portal-slurm{self.slot}-{host}"

    @property
    def directory(self) -> Path:
        return ROOT / str(self.slot)

    @property
    def munge(self) -> Path:
        """The host munged's files (and the key the containers copy)."""
        return self.directory / "munge"


def image() -> str:
    """The Slurm image, built when no image has the tag of its files' hash."""
    digest = hashlib.sha256(BASE.encode())
    for path in sorted(IMAGE_DIR.iterdir()):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    tag = f"{IMAGE}:{digest.hexdigest()[:12]}"
    if subprocess.run([BUILDER, "image", "inspect", tag], capture_output=True).returncode == 0:
        return tag
    ensure_base()
    dockerfile = str(IMAGE_DIR / "slurm.Dockerfile")
    build = [BUILDER, "build", "-q", "--build-arg", f"BASE={BASE}", "-t", tag, "-f", dockerfile]
    run([*build, str(IMAGE_DIR)], env={**os.environ, "DOCKER_BUILDKIT": "1"}, timeout=1200)
    return tag


def slurm_conf(layout: Layout, auth_info: str = "") -> str:
    """The cluster's slurm.conf; ``auth_info`` the host's ``AuthInfo`` line."""
    nodes = "\n".join(
        f"NodeName={node} NodeAddr={layout.ip(node)} NodeHostname={node} CPUs={NODE_CPUS}"
        f" RealMemory={NODE_MEMORY_MB} Gres=gpu:{GPU_TYPE}:{NODE_GPUS} State=UNKNOWN"
        for node in NODES
    )
    return f"""\
# Written by tests/support/slurm_cluster.py for TEST_SLOT={layout.slot}.
ClusterName=portaltest{layout.slot}
SlurmctldHost=ctl({layout.ip("ctl")})
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
{auth_info}
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup
JobAcctGatherType=jobacct_gather/cgroup
MpiDefault=none
GresTypes=gpu
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
DefMemPerCPU={DEF_MEM_PER_CPU_MB}
# Heterogeneous jobs are placed by the backfill scheduler only: every second, not every 30 s.
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1
MaxJobCount=100000
# Ended jobs stay in `scontrol show job` for 10 minutes (there is no accounting database).
MinJobAge=600
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
{nodes}
PartitionName={PARTITION} Nodes={",".join(NODES)} Default=YES MaxTime=INFINITE State=UP
"""


# Each node's GPUs: character devices of NVIDIA's major number, made by entrypoint.sh, with no
# driver behind them. Slurm schedules them as gres and gives each task its own
# (CUDA_VISIBLE_DEVICES); nothing can compute on them.
GRES_CONF = "".join(
    f"NodeName={node} Name=gpu Type={GPU_TYPE} File=/dev/nvidia[0-{NODE_GPUS - 1}]\n"
    for node in NODES
)

CGROUP_CONF = """\
CgroupPlugin=cgroup/v1
ConstrainRAMSpace=yes
ConstrainCores=no
ConstrainDevices=no
"""


# What slurmd needs to make cgroups (entrypoint.sh mounts the hierarchies again, writable):
# --privileged's capabilities but CAP_SYS_RESOURCE, which this machine's bounding set lacks (runc
# then fails "unable to apply caps"), mount(2) allowed, and a cgroup namespace of its own.
CGROUP_ACCESS = (
    "--cap-add=ALL",
    "--cap-drop=SYS_RESOURCE",
    "--security-opt=seccomp=unconfined",
    "--security-opt=apparmor=unconfined",
    "--cgroupns=private",
)


def clashing_network(layout: Layout) -> str:
    """The name of another Docker network whose subnet overlaps this slot's, or ''."""
    names = run([BUILDER, "network", "ls", "--format", "{{.Name}}"]).split()
    if not names:
        return ""
    for network in json.loads(run([BUILDER, "network", "inspect", *names])):
        if network["Name"] == layout.network:
            continue
        for config in (network.get("IPAM") or {}).get("Config") or []:
            subnet = config.get("Subnet", "")
            if (
                ":" not in subnet
                and subnet
                and layout.subnet.overlaps(ipaddress.IPv4Network(subnet, strict=False))
            ):
                return f"{network['Name']} ({subnet})"
    return ""


def stop(layout: Layout) -> None:
    """Remove the slot's containers, network, host munged and directory (what there is)."""
    names = [layout.container(host) for host in ("ctl", *NODES)]
    subprocess.run([BUILDER, "rm", "-f", "-v", *names], capture_output=True, check=False)
    subprocess.run([BUILDER, "network", "rm", layout.network], capture_output=True, check=False)
    stop_munged(layout.munge / "munge.socket")
    shutil.rmtree(layout.directory, ignore_errors=True)


def stop_munged(socket: Path) -> None:
    """The host munged of ``socket`` ended (found by its command line: an interrupted run may
    have lost its pid file), once it has written its seed file on the way out, which would
    otherwise land in a directory being removed."""
    flag = f"--socket={socket}".encode()
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[0].endswith(b"munged") and flag in argv:
            pids.append(int(cmdline.parent.name))
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{pid}").exists() for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)


def start_munged(layout: Layout) -> Path:
    """A munged on the host for this cluster only; its socket."""
    files = layout.munge
    files.mkdir(mode=0o755, parents=True)  # munged: its socket is for all
    key = files / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    socket = files / "munge.socket"
    run(
        [
            "munged",
            f"--socket={socket}",
            f"--key-file={key}",
            f"--pid-file={files / 'munged.pid'}",
            f"--seed-file={files / 'munged.seed'}",
            f"--log-file={files / 'munged.log'}",
        ]
    )
    return socket


def write_configs(layout: Layout, socket: Path) -> tuple[Path, Path]:
    """The host's slurm.conf and the containers' /etc/slurm directory."""
    host = layout.directory / "host"
    nodes = layout.directory / "etc"
    for directory in (host, nodes):
        directory.mkdir(mode=0o755)
    (host / "slurm.conf").write_text(slurm_conf(layout, f"AuthInfo=socket={socket}"))
    (nodes / "slurm.conf").write_text(slurm_conf(layout))
    (nodes / "cgroup.conf").write_text(CGROUP_CONF)
    (nodes / "gres.conf").write_text(GRES_CONF)
    return host / "slurm.conf", nodes


def start_container(layout: Layout, tag: str, host: str, etc: Path, shared: Path) -> None:
    hosts = [f"--add-host={name}:{layout.ip(name)}" for name in ("ctl", *NODES)]
    if host == "ctl":
        command, mounts = ["slurmctld", "-D"], []
    else:
        command, mounts = ["slurmd", "-D", "-N", host], ["-v", f"{shared}:{shared}"]
    run(
        [
            BUILDER,
            "run",
            "-d",
            f"--name={layout.container(host)}",
            f"--hostname={host}",
            f"--network={layout.network}",
            f"--ip={layout.ip(host)}",
            *CGROUP_ACCESS,
            *hosts,
            "-v",
            f"{layout.munge / 'munge.key'}:/cluster/munge.key:ro",
            "-v",
            f"{etc}:/etc/slurm:ro",
            *mounts,
            tag,
            *command,
        ]
    )


def wait_idle(cluster: SlurmCluster, seconds: float = 120) -> None:
    """Until the host's ``sinfo`` shows every node idle; an error with the daemons' logs."""
    deadline = time.monotonic() + seconds
    env = {**os.environ, **cluster.env}
    last = ""
    while time.monotonic() < deadline:
        done = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True, text=True, env=env
        )
        last = done.stdout + done.stderr
        states = dict(line.split() for line in done.stdout.splitlines() if line.strip())
        if done.returncode == 0 and all(states.get(node) == "idle" for node in cluster.nodes):
            return
        time.sleep(1)
    logs = "\n".join(
        f"--- docker logs {cluster.containers[host]}\n{cluster.logs(host)}"
        for host in ("ctl", *cluster.nodes)
    )
    raise AssertionError(
        f"the Slurm nodes were not idle in {seconds:.0f} s; last sinfo:\n{last}\n{logs}"
    )


def start(slot_number: int | None = None) -> SlurmCluster:
    """Build the image if needed, then start the slot's cluster and wait until it is idle."""
    layout = Layout(slot() if slot_number is None else slot_number)
    ensure_dockerd()
    tag = image()
    stop(layout)
    if clash := clashing_network(layout):
        raise AssertionError(f"{layout.subnet} of TEST_SLOT={layout.slot} overlaps {clash}")
    layout.directory.mkdir(mode=0o755, parents=True)
    shared = layout.directory / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # jobs of any user write their logs there
    conf, etc = write_configs(layout, start_munged(layout))
    cluster = SlurmCluster(
        conf=conf,
        env={"SLURM_CONF": str(conf)},
        shared=shared,
        nodes=list(NODES),
        node_ips={node: layout.ip(node) for node in NODES},
        partition=PARTITION,
        slot=layout.slot,
        containers={host: layout.container(host) for host in ("ctl", *NODES)},
    )
    try:
        run([BUILDER, "network", "create", f"--subnet={layout.subnet}", layout.network])
        for host in ("ctl", *NODES):
            start_container(layout, tag, host, etc, shared)
        wait_idle(cluster)
    except BaseException:
        stop(layout)
        raise
    return cluster


def stop_cluster(cluster: SlurmCluster) -> None:
    """Remove what :func:`start` made: containers, network, host munged, directory."""
    stop(Layout(cluster.slot))
