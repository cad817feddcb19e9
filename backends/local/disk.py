"""A task's disk limit on the local backend: its working directory is a file system of its own.

As root, each task's ``work`` directory is an ext4 file system in a sparse file of
``LOCAL_TASK_DISK_MB`` beside it (``work.img``, loop-mounted ``nosuid,nodev``), so a task that
fills its directory gets "No space left on device" while the host keeps its disk: the file
takes only what the task writes. Measured here: 6 ms for ``mkfs.ext4`` of a 10 GiB sparse file
and 7 to 17 ms for the mount, per task start (``bench/sandbox.py``). /tmp and /dev/shm are
tmpfs of their own sizes (``sandbox.bwrap_args``). Without root, or without loop devices, the
working directory is a plain directory and the limits report says the disk is not limited.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

IMAGE = "work.img"  # in the task's control directory, beside ``work``
# No blocks kept back for root; no journal (a task's scratch space: after a crash the task is
# gone with it) and no room to grow it online, which halves mkfs's time (14 ms to 6 ms here).
MKFS = ["mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal,^resize_inode"]


def available() -> bool:
    """Whether a working directory can be a file system of its own here."""
    return (
        os.geteuid() == 0
        and Path("/dev/loop-control").exists()
        and all(shutil.which(tool) for tool in ("mkfs.ext4", "mount", "umount"))
    )


def mount_limited(control: Path, work: Path, size_mb: int, owner: tuple[int, int]) -> None:
    """Make ``work`` an empty file system of ``size_mb`` owned by ``owner`` (uid, gid), mode
    700, with no ``lost+found`` for the task to trip over."""
    image = control / IMAGE
    fd = os.open(image, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.ftruncate(fd, size_mb * 1024 * 1024)
    os.close(fd)
    uid, gid = owner
    options = f"lazy_itable_init=1,lazy_journal_init=1,root_owner={uid}:{gid}"
    _run([*MKFS, "-E", options, str(image)])
    _run(["mount", "-o", "loop,nosuid,nodev,noatime", str(image), str(work)])
    shutil.rmtree(work / "lost+found", ignore_errors=True)
    work.chmod(0o700)


def release(control: Path, work: Path) -> None:
    """Unmount the task's file system (lazily: a terminal may still hold it) and drop its file."""
    if os.path.ismount(work):
        subprocess.run(["umount", "-l", str(work)], capture_output=True, check=False)  # noqa: S607
    (control / IMAGE).unlink(missing_ok=True)


def release_all(root: Path) -> None:
    """Unmount every task file system under ``root`` (before a task root is deleted whole: a
    mount left behind holds its loop device and its file's space until the machine restarts)."""
    top = os.path.realpath(root)
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return
    # /proc/self/mounts escapes spaces and the like as octal (\040).
    points = [line.split()[1].encode().decode("unicode_escape") for line in lines]
    for point in sorted(points, key=len, reverse=True):
        if point.startswith(top + os.sep):
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)  # noqa: S607


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise OSError(f"{argv[0]} failed ({done.returncode}): {done.stderr.strip()[:300]}")
