"""A task's control directory on this machine: the names of the files in it and the small
helpers that read and write them.

``root/<attempt_key>/<role>-<index>[-r<retry>]`` holds ``bootstrap.sh``, ``stdout.log``,
``stderr.log``, ``task.json`` (pids, start times, GPUs, ports, stop request), the files named
below, the task's own directory (``work``) and, once the task has ended, ``exit_code``.
"""

from __future__ import annotations

import os
import re
from datetime import datetime
from pathlib import Path

from backends.base import check_file_path

SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")  # of an attempt's and a task's directory
WORK = "work"  # the task's own directory (PAI_WORK_DIR) in its control directory
IMAGE = "image"  # the image the task runs in (LOCAL_IMAGES=charliecloud)
KEEP_UNTIL = ".keep_until"  # in ``work``: the epoch second the debug plugin keeps it until


def write_private(path: Path, content: str) -> None:
    """``path`` holding ``content``, readable and writable by its owner only (mode 600)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(content)
    os.chmod(path, 0o600)


def write_files(workdir: Path, files: dict[str, str]) -> None:
    """The task's secret files, readable by their owner only (directories 700, files 600)."""
    for relative, content in files.items():
        path = workdir / check_file_path(relative)
        for parent in reversed(path.relative_to(workdir).parents[:-1]):
            (workdir / parent).mkdir(mode=0o700, exist_ok=True)
        write_private(path, content)


def chown_tree(top: Path, uid: int, gid: int) -> None:
    """``top`` and everything in it owned by the task's uid (its own working directory)."""
    os.chown(top, uid, gid)
    for path in top.rglob("*"):
        os.chown(path, uid, gid, follow_symlinks=False)


def read_text(path: Path) -> str | None:
    """The file's text, None when it cannot be read (missing, most often)."""
    try:
        return path.read_text()
    except OSError:
        return None


def kept_until(work: Path) -> float:
    """The epoch second the debug plugin keeps ``work`` until (0: not kept)."""
    text = read_text(work / KEEP_UNTIL) or ""
    try:
        return float(text.strip())
    except ValueError:
        return 0.0


def parse_time(value: str | None) -> datetime | None:
    """A time saved in ``task.json`` (ISO 8601); None when missing or unreadable."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None
