"""The sandbox of a task on the local backend: bubblewrap (``bwrap``, Flatpak's sandbox).

A task starts with nothing of the portal and gets what it needs: the system read-only, its own
working directory read-write, a private ``/tmp``, ``/dev`` with only its GPUs' nodes, the
storages it mounts, a ``/proc`` of its own pid namespace, and an environment built from scratch
(``SYSTEM_PATH``, ``HOME`` and the task's variables). The portal's tree, its ``var/`` (secret key,
SQLite database, Redis password), the task root with every other task, the portal user's home
and the sockets of local databases are covered by empty tmpfs. The network is the host's: tasks
of one job reach each other by their ports as on any cluster; as root, the task firewall
(``firewall``) keeps them from every other port of this host (the portal's services included).

When the portal runs as root, each portal user's tasks run under a uid of their own
(``uid_base + user id``, ``setpriv`` drops every privilege before ``bwrap`` runs unprivileged),
their working directories belong to that uid, and a cgroup per task (``cgroups``, v2 or v1)
enforces ``memoryMB``, ``cpu`` and a number of processes. As an ordinary user the portal still
hides all of the above; the limits are then best effort (``RLIMIT_AS`` for memory, nothing for
cpu) and other users' tasks do not run unless an admin allows it (``LOCAL_REQUIRE_LIMITS``).

The sandbox's pid 1 is bwrap's init, whose only child is the task's bootstrap: when the bootstrap
ends, init ends with its exit status and the kernel kills everything left in the pid namespace
(``setsid``, ``nohup``, double forks included); killing init on Stop kills them all the same.
``--info-fd`` writes init's host pid into the task's control directory (``SANDBOX_INFO``), where
Stop (SIGTERM to init's process group: the bootstrap and what it did not move elsewhere, then
SIGKILL to init) and the web terminal (``nsenter`` into its namespaces) find it.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

from backends.base import StorageMount
from backends.local import cgroups, gpus
from backends.local.process import TaskRecord, is_alive, proc_stat

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SANDBOX_INFO = "sandbox.json"  # bwrap's --info-fd, in the task's control directory
PASSWD = "passwd"  # noqa: S105 - a file name; the sandbox's /etc/passwd (the system's, plus the task's uid)
# Sockets of services on this machine that trust local connections: covered in every sandbox.
LOCAL_SOCKET_DIRS = ("/run/postgresql", "/run/redis", "/run/mysqld")
# Run by the wrapper (as the portal's user) in place of the task: set its open files' and
# (without a memory cgroup) address space's limits, join the task's cgroups, open what bwrap
# copies into the sandbox, as root bind the directories bwrap needs at their gates (``GATES``) in
# a mount namespace of its own and detach the task root there, then exec the rest of the
# arguments (setpriv, bwrap, ...): ``prelude.c``, built by ``make install`` beside the portal's
# Python (``task_command`` gives its arguments).
PRELUDE = Path(sys.prefix, "bin", "portal-task-prelude")
GATES = Path("/run/portal-tasks")
# Stop writes this file into the task's working directory before it signals the sandbox: a
# signal to the sandbox's init before it has forked the bootstrap is lost (the kernel drops
# what a pid namespace's init has no handler for), so the bootstrap's first step looks for it.
STOP_FLAG = ".portal-stop"
STOP_CHECK = 'if [ -e "$0/.portal-stop" ]; then exit 143; fi; exec "$@"'
BOOTSTRAP_FD, PASSWD_FD, INFO_FD = "8", "9", "6"


@dataclass(frozen=True)
class SandboxConfig:
    """How the local backend sandboxes tasks (``LOCAL_SANDBOX*`` settings)."""

    enabled: bool = True  # False only where an admin explicitly allowed unsandboxed tasks
    uid_base: int = 200_000  # as root: a task of portal user N runs as uid_base + N
    hidden: tuple[str, ...] = ()  # what a task must not see: the portal's tree, var/, ...
    cgroup_root: Path = Path("/sys/fs/cgroup")  # cgroups.py: v2 or v1, as root
    pids_max: int = 4096  # processes and threads of one task (LOCAL_TASK_PIDS_MAX)
    nofile: int = 65_536  # open files of one process (LOCAL_TASK_NOFILE)
    disk_mb: int = 10_240  # its working directory and /tmp (LOCAL_TASK_DISK_MB; 0: unlimited)
    # Other users' tasks wait rather than run without a kernel limit (LOCAL_REQUIRE_LIMITS).
    require_limits: bool = True
    bwrap: str = "bwrap"
    # Directories every task sees read-write at the same path (LOCAL_SANDBOX_SHARED).
    shared: tuple[str, ...] = field(default=())
    dev_dir: Path = Path("/dev")  # where the GPUs' device nodes are
    proc_driver: Path = gpus.PROC_DRIVER  # where the driver says which GPU has which node
    # "charliecloud": a task with a dockerImage runs in it (images.py); "": the image is unused.
    images: str = ""
    image_storage: Path = Path("/var/tmp/portal-images")  # noqa: S108 - ch-image's storage


@dataclass(frozen=True)
class TaskIdentity:
    """Who a task runs as: its uid and gid, and the name its passwd entry gives it."""

    uid: int
    gid: int
    name: str
    home: str


def bwrap_path(config: SandboxConfig) -> str | None:
    return shutil.which(config.bwrap)


def identity_for(config: SandboxConfig, owner_id: int | None, work: Path) -> TaskIdentity | None:
    """The uid a task of portal user ``owner_id`` runs as when the portal is root, else None
    (the task runs as the portal's own user, inside the sandbox all the same)."""
    name = task_user_name(config, owner_id)
    if name is None:
        return None
    uid = config.uid_base + (owner_id or 0)
    return TaskIdentity(uid=uid, gid=uid, name=name, home=str(work))


def task_user_name(config: SandboxConfig, owner_id: int | None) -> str | None:
    """The name of the uid portal user ``owner_id``'s tasks run as (``u<uid>``, in the passwd
    file of their sandboxes), or None where they run as the portal's own user."""
    if not config.enabled or os.geteuid() != 0:
        return None
    return f"u{config.uid_base + (owner_id or 0)}"


def passwd_with(identity: TaskIdentity) -> str:
    """The system's /etc/passwd plus the task's user, so that ``id``, ``ssh`` and ``sshd``
    (which refuse a uid without a name) work in the sandbox."""
    try:
        system = Path("/etc/passwd").read_text()
    except OSError:
        system = ""
    if system and not system.endswith("\n"):
        system += "\n"
    return f"{system}{identity.name}:x:{identity.uid}:{identity.gid}::{identity.home}:/bin/sh\n"


def bwrap_args(
    config: SandboxConfig,
    task_path: str,
    work: Path,
    bootstrap: Path,
    task_gpus: list[gpus.GPU] | None,
    storages: list[StorageMount],
    shm_mb: int,
    passwd: bool,
    gates: dict[str, str] | None = None,
    task_root: Path | None = None,
    image: tuple[str, str] | None = None,
    command: list[str] | None = None,
) -> list[str]:
    """bwrap's arguments for one task: its pid 1 (bwrap's init) runs the bootstrap (or
    ``command``). ``gates`` maps a directory to bind to where bwrap finds it (``make_gates``):
    the task runs as another uid than the portal's, which may not pass through the directories
    above. ``image``: a directory bound read-only (its source, its place in the sandbox)."""
    gates = gates or {}
    # A /tmp and /dev/shm of the task's own, empty, gone with it; /tmp holds at most the
    # task's disk limit (its pages count as the task's memory too).
    args = [config.bwrap, "--ro-bind", "/", "/"]
    if config.disk_mb > 0:
        args += ["--size", str(config.disk_mb * 1024 * 1024)]
    args += ["--tmpfs", "/tmp"]  # noqa: S108
    binds = [str(work), *config.shared, *(store.path for store in storages)]
    hidden = covered(
        [*config.hidden, *LOCAL_SOCKET_DIRS, *([str(task_root)] if task_root else [])],
        binds if gates else [],
    )
    for path in hidden:  # an empty tmpfs over it (read-only below): its files are gone
        args += ["--tmpfs", path]
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += ["--size", str(max(1, shm_mb) * 1024 * 1024), "--tmpfs", "/dev/shm"]  # noqa: S108
    args += gpus.bwrap_args(task_gpus, config.dev_dir, config.proc_driver)
    for path in config.shared:
        args += ["--bind", gates.get(path, path), path]
    for store in storages:
        source = gates.get(store.path, store.path)
        args += ["--ro-bind" if store.read_only else "--bind", source, store.path]
    args += ["--bind", gates.get(str(work), str(work)), str(work)]
    args += ["--ro-bind-data", BOOTSTRAP_FD, str(bootstrap)]
    if image is not None:
        args += ["--ro-bind", gates.get(image[0], image[0]), image[1]]
    for path in hidden:  # after the binds under them: they made their mount points
        args += ["--remount-ro", path]
    if passwd:
        args += ["--ro-bind-data", PASSWD_FD, "/etc/passwd"]
    args += [
        "--setenv",
        "PATH",
        task_path,  # the wrapper's tools came from the system's; the task's from its own
        "--chdir",
        str(work),
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--new-session",  # no TIOCSTI into a terminal outside; the group Stop signals
        "--die-with-parent",
        "--info-fd",
        INFO_FD,
        "/bin/sh",  # exits as if the bootstrap got the SIGTERM of a stop requested already
        "-c",
        STOP_CHECK,
        str(work),
        *(command or ["/bin/sh", str(bootstrap)]),
    ]
    return args


def covered(hidden: list[str], binds: list[str]) -> list[str]:
    """Where an empty tmpfs goes, parents first: each of ``hidden`` (those under /tmp or under
    another aside: they are empty already) and, for a task of another uid, the highest
    directory it may not pass through above each of ``binds`` (bwrap, run as that uid, makes
    the mount points)."""
    points = [p for p in hidden if os.path.isdir(p) and not Path(p).is_relative_to("/tmp")]  # noqa: S108
    for path in binds:
        for parent in reversed(Path(path).parents):
            if parent.is_relative_to("/tmp"):  # noqa: S108
                break
            try:
                passable = parent.stat().st_mode & 0o001
            except OSError:  # not there: bwrap says so when it binds
                break
            if not passable:
                points.append(str(parent))
                break
    unique = sorted(dict.fromkeys(points), key=lambda p: len(Path(p).parts))
    # One under another is hidden with it: a tmpfs more would cost a mount and a remount, and
    # bwrap reads the whole mount table for each (with a hundred tasks' file systems in it,
    # most of a task start's time in bwrap).
    return [p for p in unique if not any(Path(p).is_relative_to(q) for q in unique if q != p)]


def drop_privileges(identity: TaskIdentity | None) -> list[str]:
    """setpriv's arguments: the task's uid and gid, no groups, no capabilities, no new ones."""
    ids = []
    if identity is not None:
        ids = [f"--reuid={identity.uid}", f"--regid={identity.gid}", "--clear-groups"]
    return ["setpriv", *ids, "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]


def rlimits(memory_mb: int, nofile: int, memory_cgroup: bool) -> tuple[str, str]:
    """What PRELUDE sets, soft and hard ("" for nothing): at most ``nofile`` open
    files per process (a million open files would pin the kernel's memory), and without a
    memory cgroup the address space (in KiB) bounded at a multiple of ``memoryMB``, a best
    effort (virtual memory is not what a task uses; runtimes like CUDA's reserve far more
    address space than memory, hence the margin)."""
    files = address = ""
    if nofile > 0:  # never above the portal's own hard limit: raising it needs a capability
        files = str(min(nofile, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    if memory_mb > 0 and not memory_cgroup:
        address = str(memory_mb * 4 * 1024)
    return files, address


def bind_sources(config: SandboxConfig, work: Path, storages: list[StorageMount]) -> list[str]:
    return [str(work), *config.shared, *(store.path for store in storages)]


def request_stop(work: Path) -> None:
    """Leave ``STOP_FLAG`` in the task's working directory (which the task owns: never
    following a link it put there, never writing into an existing file)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    with contextlib.suppress(OSError):
        os.close(os.open(work / STOP_FLAG, flags, 0o600))


def make_gates(ref: str, sources: list[str]) -> dict[str, str]:
    """An empty mount point under ``GATES`` for each of ``sources`` (as root); empty where
    ``GATES`` cannot be made (bwrap then needs a path the task's uid can pass through)."""
    top = GATES / cgroups.name_of(ref)
    try:
        GATES.mkdir(mode=0o711, exist_ok=True)
        GATES.chmod(0o711)
        top.mkdir(mode=0o711, exist_ok=True)
        gates = {}
        for number, source in enumerate(dict.fromkeys(sources)):
            (top / str(number)).mkdir(mode=0o700, exist_ok=True)
            gates[source] = str(top / str(number))
    except OSError:
        return {}
    return gates


def remove_gates(ref: str) -> None:
    shutil.rmtree(GATES / cgroups.name_of(ref), ignore_errors=True)


def task_command(
    bootstrap: Path,
    passwd_file: str,
    cgroup_procs: list[Path],
    limits: tuple[str, str],
    privileges: list[str],
    bwrap: list[str],
    gates: dict[str, str] | None = None,
    detach: Path | None = None,
) -> list[str]:
    """The argv the wrapper runs as the task: PRELUDE (``limits`` from ``rlimits``), then
    setpriv, then bwrap. With ``gates``, the mount ``detach`` (the task root) is detached once
    they are made."""
    mounts = []
    if gates:
        mounts = ["--gates", *(p for pair in gates.items() for p in pair), "--"]
        mounts += ["--detach", str(detach)] if detach else []
    return [
        str(PRELUDE),
        *limits,
        str(bootstrap),
        passwd_file,
        *(str(p) for p in cgroup_procs),
        "--",
        *mounts,
        *privileges,
        *bwrap,
    ]


def sandbox_init(control: Path, bwrap_pid: int | None) -> int | None:
    """The host pid of the sandbox's pid 1 (the bootstrap), or None when it has ended or is not
    there yet. Checked to be a child of the task's bwrap, so a reused pid is never signalled."""
    try:
        pid = int(json.loads((control / SANDBOX_INFO).read_text())["child-pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if bwrap_pid is None or parent_of(pid) != bwrap_pid:
        return None
    stat = proc_stat(pid)
    return pid if stat is not None and stat[0] not in ("Z", "X", "x") else None


def namespaces_ready(pid: int) -> bool:
    """Whether the sandbox of init ``pid`` has its uid and gid maps: bwrap names its init
    (``--info-fd``) before they are written, and ``nsenter --setgid`` fails until then."""
    try:
        return all(Path(f"/proc/{pid}/{m}").read_text().strip() for m in ("uid_map", "gid_map"))
    except OSError:
        return False


def parent_of(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("PPid:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def shell_command(
    init_pid: int, uid: int | None, work: Path, image: tuple[int, str] | None = None
) -> list[str]:
    """An interactive shell in the running sandbox of ``init_pid`` (its mounts, its pid
    namespace, as the task's uid, without capabilities), the pty as controlling terminal.
    ``image``: the task runs in an image (``images.py``): the pid, in the sandbox, of its
    process in the image and the working directory there; the shell then joins the image's
    namespaces too, with the sandbox's own nsenter (after setpriv: no capability on the way)."""
    gid = os.getegid() if uid is None else uid
    uid = os.geteuid() if uid is None else uid
    into_image: list[str] = []
    if image is not None:
        into_image = ["nsenter", f"--target={image[0]}", "--user", "--mount", "--root", "--wd"]
        into_image += ["--preserve-credentials", "--"]
        work = Path(image[1])
    enter = ["nsenter", f"--target={init_pid}", "--user", "--mount", "--pid", "--root", "--wd"]
    enter += [f"--setuid={uid}", f"--setgid={gid}"]
    if os.geteuid() != 0:  # the owner of the namespaces, without capabilities outside them
        enter = [sys.executable, "-I", "-S", "-c", NSENTER_VIA_PARENT, str(init_pid)]
        enter += ["--preserve-credentials"]
    return [
        *enter,
        "--",
        "setpriv",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--",
        "setsid",
        "-c",
        *into_image,
        "/bin/sh",
        "-c",
        # bash where the system (or the image) has it, else its sh
        'cd "$0" 2>/dev/null; command -v bash >/dev/null && exec bash -i; exec sh -i',
        str(work),
    ]


# The terminal of a portal that is not root. bwrap (unprivileged, with --dev) mounts the
# sandbox's /dev/pts as root of a first user namespace, then moves its init into a second one that
# maps the task's uid: the pid and mount namespaces belong to the first, which no process is in.
# ``nsenter --target --user`` joins the second and may then not join them. This joins the first
# (NS_GET_PARENT of the second; the portal's uid is its root, so it keeps its capabilities there
# through exec), the sandbox's pid and mounts, then (the sandbox's own nsenter, as that root) the
# second, where the portal's uid is the task's; setpriv follows as on the root path. Credentials
# stay as they are (setgroups is denied in both).
NSENTER_VIA_PARENT = """import fcntl, os, sys
init = sys.argv[1]
user = os.open(f"/proc/{init}/ns/user", os.O_RDONLY)
parent = fcntl.ioctl(user, 0xB702)  # NS_GET_PARENT
os.set_inheritable(parent, True)
os.close(user)
argv = ["nsenter", f"--target={init}", f"--user=/proc/self/fd/{parent}", "--pid", "--mount"]
argv += ["--root", "--wd", "--preserve-credentials", "--", "nsenter", "--target=1", "--user"]
os.execvp("nsenter", argv + sys.argv[2:])
"""


def image_process(init_pid: int) -> int | None:
    """The pid, in the sandbox's pid namespace, of the task's process in its image: the child
    of the sandbox's init that ch-run moved into namespaces of its own (None until then)."""
    try:
        own = os.readlink(f"/proc/{init_pid}/ns/user")
        children = Path(f"/proc/{init_pid}/task/{init_pid}/children").read_text().split()
    except OSError:
        return None
    for child in children:
        try:
            if os.readlink(f"/proc/{child}/ns/user") == own:
                continue
            status = Path(f"/proc/{child}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    return None


def signal_task(control: Path, record: TaskRecord, sig: signal.Signals) -> None:
    """Signal a task: in its sandbox, the bootstrap's group (SIGTERM lets its exit steps run);
    SIGKILL to the sandbox's pid 1 ends its whole pid namespace, whatever the task started."""
    init = sandbox_init(control, record.pid) if record.sandboxed else None
    if init is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(init, sig)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(init, sig)
        if sig != signal.SIGKILL:
            return
    signal_group(record, sig)


def signal_group(record: TaskRecord, sig: signal.Signals) -> None:
    """Signal the task's process group, unless its pid was reused by someone else. Just after
    its launch the task may not have made its group yet (the wrapper prints its pid once it is
    forked, ``wrapper.c``): then the task's process alone, which is all there is of it."""
    if record.pgid is None:
        return
    if not record.alive():
        return
    try:
        os.killpg(record.pgid, sig)
    except ProcessLookupError:
        if record.pid is not None and is_alive(record.pid, record.start_time):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(record.pid, sig)
    except PermissionError:
        pass
