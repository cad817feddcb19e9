"""The listener of ended tasks: wakes the reconcile loop the moment a task ends (the local
backend's tasks, and the Slurm backend's through the shared directory).

Each task's wrapper (``backends/local/wrapper.c``, outside the task's sandbox) creates an empty file
in ``<root>/.ended`` once it has written the exit code. This listener sleeps in ``select()`` on
an inotify descriptor watching that one directory, and when a file appears gives the refs of
all files there (``LocalBackend.watch`` turns them into observations for ``watchcluster``, which
records them as changed and asks for a pass), then deletes those files. Why this shape:

- no polling and no extra tool in the wrapper (no redis-cli, no socat): creating a file is all
  a wrapper (the local one is C, the Slurm one a shell) need do, cheaply and safely;
- nothing is lost: a file stays until its batch was handled, so ends that happen while the
  listener is down (restarting, Redis unreachable) are handed over when it is back, and it
  reads the whole directory on every wake-up and at start (an overflowed inotify queue or a
  burst of a thousand ends costs one round);
- one directory, one watch: inotify is not recursive, and watching every task's directory
  would mean a watch per task.

inotify comes from libc through ctypes: three calls, not worth a package.
"""

from __future__ import annotations

import ctypes
import logging
import os
import select
import struct
import threading
from collections.abc import Iterator
from errno import ENOENT
from pathlib import Path

log = logging.getLogger(__name__)
ENDED_DIR = ".ended"  # under the tasks' root: one empty file per task that ended, until seen


def ended_marker(root: Path, ref: str) -> Path:
    """The file the wrapper of ``ref`` (in ``root / ref``) creates once the task's exit code
    is written."""
    return root / ENDED_DIR / ref.replace("/", "+")


def ref_of_marker(name: str) -> str | None:
    """The ref an ``ENDED_DIR`` file name stands for (None: not one the wrapper writes)."""
    attempt, plus, task = name.partition("+")
    return f"{attempt}/{task}" if plus and attempt and task and "+" not in task else None


IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_IGNORED = 0x00008000  # the watch is gone (its directory was removed)
EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len; then len bytes of name
BATCH = 5000  # refs given at most per batch (the rest in the next one)
STOP_SECONDS = 0.5  # how soon a set ``stop`` is seen while no task ends


def inotify_on(directory: Path) -> int:
    """A non-blocking inotify descriptor reporting files created in (or moved to) ``directory``."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd: int = libc.inotify_init1(os.O_CLOEXEC | os.O_NONBLOCK)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "inotify_init1 failed")
    mask = IN_CREATE | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF
    if libc.inotify_add_watch(fd, os.fsencode(directory), mask) < 0:
        errno = ctypes.get_errno()
        os.close(fd)
        if errno == ENOENT:  # removed since it was made
            raise WatchLost(f"{directory} was removed before it could be watched")
        raise OSError(errno, f"cannot watch {directory}")
    return fd


def ended_batches(root: Path, stop: threading.Event | None = None) -> Iterator[list[str]]:
    """The refs of the tasks that end under ``root``, a batch (up to ``BATCH``) at a time, as
    they end, until ``stop`` is set (seen within ``STOP_SECONDS``); forever without one.

    A batch's files are deleted only when the next batch is asked for, that is once the caller
    handled this one: a caller that fails (Redis down) and stops leaves them for the next
    listener. Files that name no ref are deleted unreported."""
    directory = root / ENDED_DIR
    root.mkdir(mode=0o700, parents=True, exist_ok=True)  # private, as the backend makes it
    directory.mkdir(mode=0o700, exist_ok=True)
    fd = inotify_on(directory)  # before the first look: no file can slip between the two
    try:
        while stop is None or not stop.is_set():
            while True:
                names = first_names(directory)
                refs = [ref for ref in map(ref_of_marker, names) if ref is not None]
                if refs:
                    yield refs
                for name in names:
                    (directory / name).unlink(missing_ok=True)
                if len(names) < BATCH:
                    break
            ready, _, _ = select.select([fd], [], [], None if stop is None else STOP_SECONDS)
            if ready:
                drain(fd)
    finally:
        os.close(fd)


def first_names(directory: Path) -> list[str]:
    """Up to ``BATCH`` names in ``directory``; its removal (before inotify reports it) is a lost
    watch like the event."""
    names: list[str] = []
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                names.append(entry.name)
                if len(names) >= BATCH:
                    break
    except FileNotFoundError as exc:
        raise WatchLost("the directory of ended tasks was removed") from exc
    return names


class WatchLost(RuntimeError):
    """The watched directory was removed or moved: a new listener must watch the new one (the
    supervisor starts it again)."""


def drain(fd: int) -> None:
    """Read the pending inotify events. What they name does not matter (the directory is read
    whole); that the directory itself went away does."""
    try:
        while data := os.read(fd, 65536):
            offset = 0
            while offset + EVENT.size <= len(data):
                _, mask, _, length = EVENT.unpack_from(data, offset)
                if mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED):
                    raise WatchLost("the directory of ended tasks was removed or moved")
                offset += EVENT.size + length
    except BlockingIOError:
        pass
