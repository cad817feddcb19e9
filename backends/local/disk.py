"""A task's disk limit on the local backend: its working directory is a file system of its own.

As root, each task's ``work`` directory is an ext4 file system in a sparse file of
``LOCAL_TASK_DISK_MB`` beside it (``work.img``, loop-mounted ``nosuid,nodev``), so a task that
fills its directory gets "No space left on device" while the host keeps its disk: the file
takes only what the task writes. Measured here: 6 ms for ``mkfs.ext4`` of a 10 GiB sparse file
and 7 to 17 ms for the mount, per task start (``bench/sandbox.py``). /tmp and /dev/shm are
tmpfs of their own sizes (``sandbox.bwrap_args``). Without root, or without loop devices, the
working directory is a plain directory and the limits report says the disk is not limited.

The loop device and the mount are made with the kernel's calls (``LOOP_CONFIGURE``, mount(2),
umount2(2)) through ctypes, not ``mount -o loop`` and ``umount``: the commands took 8.5 ms of
CPU per task (util-linux scans every loop device and the mount table; it grows with the tasks
running), the calls 0.4 ms; with 100 tasks running at once, ``mount`` was 13% of the machine's
CPU in ``bench/e2e.py``'s batch. The device is set to clear itself once unmounted, as
``mount -o loop`` does.

The task root (``LOCAL_TASK_ROOT``, by default ``var/tasks``) is made a mount of its own (a
private bind of itself) before the first task file system is mounted under it, so that each
task's sandbox can detach every other task's file system in one call (``sandbox.PRELUDE``):
bwrap reads the mount table once for every mount it makes, and with 100 tasks running, the
kernel's formatting of their mounts in it was 14% of the machine's CPU in ``bench/e2e.py``'s
oversubscribed batch.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import shutil
import struct
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

IMAGE = "work.img"  # in the task's control directory, beside ``work``
# No blocks kept back for root; no journal (a task's scratch space: after a crash the task is
# gone with it) and no room to grow it online, which halves mkfs's time (14 ms to 6 ms here).
MKFS = ["mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal,^resize_inode"]


LOOP_CONTROL = "/dev/loop-control"
LOOP_CTL_GET_FREE = 0x4C82
LOOP_CONFIGURE = 0x4C0A  # Linux 5.8
LO_FLAGS_AUTOCLEAR = 4
# struct loop_config: fd, block_size, then struct loop_info64 (device, inode, rdevice, offset,
# sizelimit; number, encrypt type, key size, flags; file name, crypt name, key; init[2]) and
# 8 reserved words
LOOP_CONFIG = struct.Struct("=II5Q4I64s64s32s2Q8Q")
MS_NOSUID, MS_NODEV, MS_NOATIME, MS_BIND, MS_PRIVATE = 2, 4, 1024, 4096, 1 << 18
MNT_DETACH = 2
LIBC = ctypes.CDLL(None, use_errno=True)
MOUNT_CALLS = ThreadPoolExecutor(1, thread_name_prefix="disk")  # a launch's, beside the rest


def available() -> bool:
    """Whether a working directory can be a file system of its own here."""
    return os.geteuid() == 0 and Path(LOOP_CONTROL).exists() and bool(shutil.which("mkfs.ext4"))


def mount_limited(
    control: Path, work: Path, size_mb: int, owner: tuple[int, int], root: Path
) -> None:
    """Make ``work`` (under the task root ``root``) an empty file system of ``size_mb`` owned
    by ``owner`` (uid, gid), mode 700, with no ``lost+found`` for the task to trip over: a copy
    of the empty file system kept in ``root`` (``template``). Callers serialise their calls
    under one ``root`` (``bind_root``)."""
    image = control / IMAGE
    copy_sparse(template(root, size_mb), image)
    device, name = loop_device(image)
    try:  # the mount holds the device once made: closing ours then does not clear it
        bind_root(root)
        flags = MS_NOSUID | MS_NODEV | MS_NOATIME
        if LIBC.mount(name.encode(), os.fsencode(work), b"ext4", flags, None) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"mounting {image} on {work}: {os.strerror(code)}")
    finally:
        os.close(device)
    os.rmdir(work / "lost+found")
    os.chown(work, *owner)
    work.chmod(0o700)


BOUND = ".bound"  # in the task root while it is a bind of itself made by ``bind_root``


def bind_root(root: Path) -> None:
    """Make the task root ``root`` a private bind of itself, unless it is a mount already or a
    task file system is mounted under it (by a process that did not bind it: the bind would hide
    it). Mounts under ``root`` are serialised by the caller (the backend's lock): one made
    between the check and the bind would be hidden, one made before the bind is private would
    propagate a copy beneath it."""
    if is_mount_point(root):
        return
    top = os.path.realpath(root)
    if any(point.startswith(top + os.sep) for point in mount_points()):
        return
    path = os.fsencode(top)
    if LIBC.mount(path, path, None, MS_BIND, None) != 0:
        return  # tasks start the slower for it, nothing else
    LIBC.mount(None, path, None, MS_PRIVATE, None)
    (root / BOUND).touch()


def unbind_root(root: Path) -> None:
    """Undo ``bind_root`` once no task file system is left under ``root`` (none has its image in
    ``<root>/<attempt>/<task>/``; under the caller's lock), so that the task root can be deleted
    as any directory when no task runs."""
    if (root / BOUND).exists() and not any(root.glob(f"*/*/{IMAGE}")):
        unmount(os.path.realpath(root))
        (root / BOUND).unlink(missing_ok=True)


def is_mount_point(path: Path) -> bool:
    """Whether something is mounted at ``path``, a bind of a directory of the same file system
    included (which ``os.path.ismount`` does not see)."""
    return mount_id(path) != mount_id(path.parent)


def mount_id(path: Path) -> int:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        for line in Path(f"/proc/self/fdinfo/{fd}").read_text().splitlines():
            if line.startswith("mnt_id:"):
                return int(line.split()[1])
    finally:
        os.close(fd)
    return -1


def mount_points() -> list[str]:
    """Where this process's mount namespace has something mounted."""
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    # /proc/self/mounts escapes spaces and the like as octal (\040).
    return [line.split()[1].encode().decode("unicode_escape") for line in lines]


def template(directory: Path, size_mb: int) -> Path:
    """An empty file system of ``size_mb`` in ``directory`` (the portal's, root's only), made
    once and copied for each task: ``mkfs.ext4`` for each task was 4 ms here when idle and
    15-25% of a reconcile pass's time while 100 tasks ran (``bench/e2e.py``'s batch), the
    copy of its 0.2 MB 0.2 ms. The copies share the file system's UUID, which ext4 allows."""
    path = directory / f".work-{size_mb}mb.img"
    if path.exists():
        return path
    made = directory / f".work-{size_mb}mb.{os.getpid()}.{threading.get_ident()}.tmp"
    fd = os.open(made, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.ftruncate(fd, size_mb * 1024 * 1024)
    os.close(fd)
    try:
        _run([*MKFS, "-E", "lazy_itable_init=1,lazy_journal_init=1", str(made)])
        os.replace(made, path)  # whole or not at all, should two launches make it at once
    finally:
        made.unlink(missing_ok=True)
    return path


def copy_sparse(source: Path, target: Path) -> None:
    """Copy ``source`` to a new ``target`` (0600): its data only, its holes left holes (the
    file system's 10 GiB are 0.2 MB of data)."""
    src = os.open(source, os.O_RDONLY | os.O_CLOEXEC)
    dst = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        size = os.fstat(src).st_size
        os.ftruncate(dst, size)
        offset = 0
        while offset < size:
            try:
                start = os.lseek(src, offset, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # no data past offset: the rest is a hole
                    break
                raise
            end = os.lseek(src, start, os.SEEK_HOLE)
            while start < end:
                start += os.copy_file_range(src, dst, end - start, start, start)
            offset = end
    finally:
        os.close(src)
        os.close(dst)


def loop_device(image: Path) -> tuple[int, str]:
    """A free loop device set to ``image``, cleared by the kernel once nothing holds it: an
    open descriptor of it and its name. Another process may take the free device first: then
    the next one."""
    backing = os.open(image, os.O_RDWR | os.O_CLOEXEC)
    control = os.open(LOOP_CONTROL, os.O_RDWR | os.O_CLOEXEC)
    try:
        for _ in range(100):
            name = f"/dev/loop{fcntl.ioctl(control, LOOP_CTL_GET_FREE)}"
            device = os.open(name, os.O_RDWR | os.O_CLOEXEC)
            # fd, block size; device, inode, rdevice, offset, size limit; number, encryption
            # type, key size, flags; file name (what losetup shows), crypt name, key; init
            config = LOOP_CONFIG.pack(
                backing, 0, 0, 0, 0, 0, 0, 0, 0, 0, LO_FLAGS_AUTOCLEAR,
                os.fsencode(image)[:63], b"", b"", 0, 0, *[0] * 8,
            )  # fmt: skip
            try:
                fcntl.ioctl(device, LOOP_CONFIGURE, config)
            except OSError as exc:
                os.close(device)
                if exc.errno != errno.EBUSY:
                    raise
                continue
            return device, name
        raise OSError(errno.EBUSY, f"no free loop device for {image}")
    finally:
        os.close(control)
        os.close(backing)


def unmount(point: str | Path) -> None:
    """Detach the file system at ``point`` (lazily: a terminal may still hold it); its loop
    device clears itself once the last user is gone."""
    LIBC.umount2(os.fsencode(point), MNT_DETACH)


def release(control: Path, work: Path) -> None:
    """Unmount the task's file system and drop its file."""
    if os.path.ismount(work):
        unmount(work)
    (control / IMAGE).unlink(missing_ok=True)


def release_all(root: Path) -> None:
    """Unmount every task file system under ``root`` (before a task root is deleted whole: a
    mount left behind holds its loop device and its file's space until the machine restarts),
    and the task roots' binds of themselves there."""
    top = os.path.realpath(root)
    for point in sorted(mount_points(), key=len, reverse=True):
        if point == top or point.startswith(top + os.sep):
            unmount(point)
            (Path(point) / BOUND).unlink(missing_ok=True)  # a task root's bind of itself


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise OSError(f"{argv[0]} failed ({done.returncode}): {done.stderr.strip()[:300]}")
