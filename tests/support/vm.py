"""A real cgroup-v2 host for the tests: a Debian 12 VM built from Debian's packages and booted with
QEMU, which runs a script of the host's and hands back its exit code and output.

This machine mounts cgroup v1; the hosts people run the portal on (Debian 12, Ubuntu 22.04 and
later, Fedora, RHEL 9) mount only the unified hierarchy. The image is built once (mmdebstrap, then
``mke2fs -d``: no loop mount) and cached outside the repository under a hash of its package list
and of ``vm_guest/`` (the build script and what it puts in the image), so a change to either
builds a new one. QEMU runs it with TCG: ``/dev/kvm`` exists on these machines but a KVM boot
hangs. Each boot writes to a throw-away layer (``snapshot=on``), so the cached image stays as
built.

The VM sees the host's folders over virtio-9p at the same paths as here (the virtualenv's absolute
paths work: the VM's /usr/bin/python3 is bookworm's 3.11, as the host's), with a writable layer of
its own on top: nothing it writes reaches this machine's tree. The unit ``portal-vm-job``
(``vm_guest/portal-vm-job``) runs the script as root once PostgreSQL and Redis are up, writes the
output and exit code back into a shared folder of the run's own, and powers the VM off.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

GUEST = Path(__file__).with_name("vm_guest")
CACHE = Path(os.environ.get("PORTAL_VM_CACHE", "/var/cache/portal-vm"))
SUITE = "bookworm"
PACKAGES = (
    "linux-image-amd64",
    "systemd-sysv",
    "udev",
    "dbus",
    "kmod",
    "python3",
    "bubblewrap",
    "util-linux",
    "mount",
    "procps",
    "iproute2",
    "nftables",
    "bash",
    "coreutils",
    "e2fsprogs",
    "busybox-static",
    "postgresql",
    "redis-server",
    "openssh-server",
    "charliecloud-runtime",
    "charliecloud-builders",
)
BUILD_TIMEOUT = 1200  # seconds; ~50 s measured here (build.log, beside the image, says)
BOOT_ALLOWANCE = 240  # seconds beyond the job's own limit: boot, services, power-off
# Seconds for the job to start (about 40 s under TCG here). A boot that hangs (seen under
# TCG) is retried once rather than left to time out the whole run.
BOOT_LIMIT = 180
STARTED = b"portal-vm: job started"
MEMORY_MB = 3072
CPUS = 2


class VmError(RuntimeError):
    """The VM did not run the job to its end (no exit code came back)."""


@dataclass(frozen=True)
class Image:
    disk: Path
    kernel: Path
    initrd: Path


@dataclass(frozen=True)
class Share:
    """A host folder the VM mounts at the same path; ``writable``: a layer of the VM's own."""

    path: Path
    writable: bool = True


@dataclass(frozen=True)
class Run:
    exit_code: int
    output: str
    console: str
    seconds: float
    booted_seconds: float | None  # the VM's uptime when the job started


def missing_tools(*, building: bool) -> list[str]:
    """What this machine lacks to boot the VM (and to build its image, when ``building``)."""
    needed = ["qemu-system-x86_64"] + (["mmdebstrap", "mke2fs", "dpkg-deb"] if building else [])
    missing = [tool for tool in needed if shutil.which(tool) is None]
    if building and os.geteuid() != 0:
        missing.append("root (mmdebstrap's root mode, mke2fs -d keeping owners)")
    return missing


def image_key() -> str:
    """The hash the cached image is filed under: its packages and every file of ``vm_guest/``."""
    digest = hashlib.sha256(f"{SUITE}\n{','.join(PACKAGES)}\n".encode())
    for path in sorted(GUEST.iterdir()):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def cached_image() -> Image | None:
    image = _image_in(CACHE / image_key())
    return image if image.disk.exists() else None


def ensure_image() -> Image:
    """The cached image, built first when there is none (one build at a time: a lock file)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with _locked(CACHE / ".lock"):
        if (image := cached_image()) is not None:
            return image
        return _build(CACHE / image_key())


def debian_mirrors(sources: Path = Path("/etc/apt")) -> list[str]:
    """This machine's apt sources for ``SUITE`` as one-line entries for mmdebstrap (its own
    default may not be a mirror this machine reaches), else Debian's own mirror."""
    found = []
    for path in sorted((sources / "sources.list.d").glob("*.sources")):
        found += _deb822_entries(path.read_text())
    for path in [sources / "sources.list", *sorted((sources / "sources.list.d").glob("*.list"))]:
        found += _one_line_entries(path.read_text()) if path.exists() else []
    return found or ["http://deb.debian.org/debian"]


def _deb822_entries(text: str) -> list[str]:
    entries = []
    for stanza in re.split(r"\n\s*\n", text):
        fields = dict(re.findall(r"^([A-Za-z-]+):[ \t]*(.*)$", stanza, re.MULTILINE))
        if "deb" not in fields.get("Types", "").split() or fields.get("Enabled") == "no":
            continue
        components = fields.get("Components", "main")
        for uri in fields.get("URIs", "").split():
            suites = [s for s in fields.get("Suites", "").split() if _of_suite(s)]
            entries += [f"deb {uri} {suite} {components}" for suite in suites]
    return entries


def _one_line_entries(text: str) -> list[str]:
    entries = []
    for line in text.splitlines():
        words = re.sub(r"\[[^]]*\]", "", line.split("#")[0]).split()  # no [options]
        if len(words) >= 3 and words[0] == "deb" and _of_suite(words[2]):
            entries.append(" ".join(words))
    return entries


def _of_suite(suite: str) -> bool:
    """``bookworm``, ``bookworm-updates``, ``bookworm-security``; not ``cloud-sdk-bookworm``."""
    return suite.split("-")[0] == SUITE


def run_in_vm(
    script: str,
    shares: Sequence[Share],
    *,
    timeout: float,
    console_log: Path | None = None,
) -> Run:
    """Boot the VM, run ``script`` (bash, as root) within ``timeout`` seconds and power off.

    ``console_log``: where the serial console is written as it comes (``tail -f`` it to watch a
    run); a temporary file otherwise. Raises ``VmError`` when no exit code came back (a boot that
    failed, or the whole run over its time), with the console's tail."""
    image = ensure_image()
    with tempfile.TemporaryDirectory(prefix="portal-vm-job-", dir="/var/tmp") as job_dir:  # noqa: S108
        job = Path(job_dir)
        _write_job(job, script, shares, timeout)
        log = console_log or job / "console.log"
        started = time.monotonic()
        command = qemu_command(image, job, shares)
        qemu_exit = _boot(command, log, timeout + BOOT_ALLOWANCE)
        if qemu_exit == BOOT_HUNG:
            hung = tail(log.read_text(errors="replace"))
            log.with_suffix(".hung.log").write_text(hung)
            qemu_exit = _boot(command, log, timeout + BOOT_ALLOWANCE)  # once more
        seconds = time.monotonic() - started
        console = log.read_text(errors="replace")
        code_file, output_file = job / "exit-code", job / "output"
        output = output_file.read_text(errors="replace") if output_file.exists() else ""
        if not code_file.exists():
            raise VmError(
                f"the VM gave no exit code after {seconds:.0f}s (QEMU exit {qemu_exit})"
                f"; output:\n{output[-4000:]}\nconsole (last lines):\n{tail(console)}"
            )
        uptime = re.search(r"portal-vm: job started after \S+ of the unit, ([\d.]+)s", console)
        booted = float(uptime.group(1)) if uptime else None
        return Run(int(code_file.read_text()), output, console, seconds, booted)


def _write_job(job: Path, script: str, shares: Sequence[Share], timeout: float) -> None:
    """The job's folder as ``vm_guest/portal-vm-job`` reads it."""
    (job / "job.sh").write_text(script)
    (job / "timeout").write_text(f"{int(timeout)}\n")
    modes = ["overlay" if share.writable else "ro" for share in shares]
    lines = [f"share{i}\t{share.path}\t{modes[i]}\n" for i, share in enumerate(shares)]
    (job / "shares").write_text("".join(lines))


BOOT_HUNG = -1000  # _boot's answer when the job did not start within the boot limit


def _boot(command: list[str], log: Path, limit: float, boot_limit: float = BOOT_LIMIT) -> int:
    """Run QEMU, its console into ``log``, for at most ``limit`` seconds; its exit status, or
    ``BOOT_HUNG`` when the console has not said the job started after ``boot_limit``."""
    with log.open("wb") as console:
        process = subprocess.Popen(  # noqa: S603
            command, stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT
        )
        began = time.monotonic()
        try:
            while STARTED not in log.read_bytes():
                if time.monotonic() - began > boot_limit:
                    return BOOT_HUNG  # killed below
                with contextlib.suppress(subprocess.TimeoutExpired):
                    return process.wait(timeout=1)
            return process.wait(timeout=max(limit - (time.monotonic() - began), 0))
        except subprocess.TimeoutExpired:
            return -9  # killed below: no exit code comes back, the caller says so
        finally:  # over its time, or this process interrupted: no VM left running
            if process.poll() is None:
                process.kill()
                process.wait()


def qemu_command(image: Image, job: Path, shares: Sequence[Share]) -> list[str]:
    """QEMU with TCG, the image's kernel, the disk behind a throw-away layer, the job's folder
    and the shares over 9p, and a user network with no way out (an address besides loopback)."""
    command = [
        "qemu-system-x86_64",
        "-accel",
        "tcg",
        "-cpu",
        "max",
        "-smp",
        str(CPUS),
        "-m",
        str(MEMORY_MB),
        "-kernel",
        str(image.kernel),
        "-initrd",
        str(image.initrd),
        "-append",
        "root=/dev/vda rootfstype=ext4 rw console=ttyS0 panic=-1 net.ifnames=0 portal_vm.job",
        "-drive",
        f"file={image.disk},format=raw,if=virtio,snapshot=on",
        "-nic",
        "user,model=virtio-net-pci,restrict=on",
        "-virtfs",
        f"local,path={job},mount_tag=job,security_model=none",
        "-display",
        "none",
        "-monitor",
        "none",
        "-serial",
        "stdio",
        "-no-reboot",
    ]
    for i, share in enumerate(shares):
        path = _virtfs_path(share.path)
        # Read-only here: the VM writes to a layer of its own (``Share.writable``).
        options = f"local,path={path},mount_tag=share{i},security_model=passthrough,readonly=on"
        command += ["-virtfs", options]
    return command


def tail(text: str, lines: int = 60) -> str:
    return "\n".join(text.splitlines()[-lines:])


def _virtfs_path(path: Path) -> str:
    if "," in str(path):  # QEMU's option syntax: a comma is written twice
        return str(path).replace(",", ",,")
    return str(path)


def _image_in(directory: Path) -> Image:
    return Image(directory / "disk.img", directory / "vmlinuz", directory / "initrd.img")


def _build(directory: Path) -> Image:
    """Run ``vm_guest/build.sh`` into a fresh folder, then put it in place and drop older
    images (each is ~1 GB)."""
    if missing := missing_tools(building=True):
        raise VmError(f"cannot build the VM image: missing {', '.join(missing)}")
    building = Path(tempfile.mkdtemp(prefix=f"{directory.name}.", dir=directory.parent))
    command = [str(GUEST / "build.sh"), str(building), ",".join(PACKAGES), *debian_mirrors()]
    started = time.monotonic()
    with (building / "build.log").open("wb") as log:
        done = subprocess.run(  # noqa: S603
            command, stdout=log, stderr=subprocess.STDOUT, timeout=BUILD_TIMEOUT, check=False
        )
    took = time.monotonic() - started
    with (building / "build.log").open("a") as log:
        log.write(f"\nbuild.sh exited {done.returncode} after {took:.0f}s\n")
    if done.returncode != 0:
        text = (building / "build.log").read_text(errors="replace")
        shutil.rmtree(building, ignore_errors=True)
        raise VmError(f"building the VM image failed ({done.returncode}):\n{tail(text)}")
    for old in CACHE.iterdir():
        if old.is_dir() and old.name != building.name:
            shutil.rmtree(old, ignore_errors=True)
    building.rename(directory)
    print(f"built the VM image in {took:.0f}s: {directory}", file=sys.stderr)
    return _image_in(directory)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
