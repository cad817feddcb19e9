"""The shared directory's files, read and written by the portal as a task may have tampered
with them: the task runs as an account that can write in its own directory, so every file is
opened from ``root`` down following no symbolic link (``logfiles.open_beneath``), read only when
it is a plain file, and written by a rename onto its name, never through what stands there."""

from __future__ import annotations

import json
import os
import stat
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from backends.logfiles import open_beneath

SMALL_FILE_BYTES = 64 * 1024  # read of a task's small files at most (address, exit code)


class SharedDir:
    def __init__(self, root: Path) -> None:
        self.root = root

    def read(self, directory: Path, name: str) -> tuple[str, datetime] | None:
        """A small file of a task's directory and when it was written; None when there is none,
        or where a symbolic link or something other than a plain file stands (the task may have
        put one there: ``logfiles.open_beneath``)."""
        try:
            parts = [*directory.relative_to(self.root).parts, name]
            fd = open_beneath(self.root, parts, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                return None
            text = f.read(SMALL_FILE_BYTES).decode("utf-8", "replace").strip()
        return text, datetime.fromtimestamp(info.st_mtime, UTC)

    def read_text(self, directory: Path, name: str) -> str:
        found = self.read(directory, name)
        return found[0] if found else ""

    def read_json(self, directory: Path, name: str) -> dict[str, Any]:
        text = self.read_text(directory, name)
        try:
            value = json.loads(text) if text else {}
        except json.JSONDecodeError:
            return {}
        return value if isinstance(value, dict) else {}

    def read_int(self, directory: Path, name: str) -> int | None:
        text = self.read_text(directory, name)
        return int(text) if text.lstrip("-").isdigit() else None

    def mtime(self, directory: Path, name: str) -> datetime | None:
        found = self.read(directory, name)
        return found[1] if found else None

    def write(self, directory: Path, name: str, text: str, mode: int = 0o600) -> None:
        """Write ``directory / name`` atomically (a reader on another node never sees half a
        file), mode 600 (or ``mode``) and owned as the directory is, through no symbolic link
        below ``root`` and onto none: a task could put a link where the portal writes
        (``peers.env``, ``stop``) to have the portal overwrite a file of its machine."""
        parts = directory.relative_to(self.root).parts
        folder = open_beneath(self.root, parts, os.O_RDONLY | os.O_DIRECTORY)
        try:
            tmp = f".{name}.tmp"
            with suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=folder)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            with os.fdopen(os.open(tmp, flags, mode, dir_fd=folder), "w") as f:
                if os.geteuid() == 0:  # the task's own account reads it (SLURM_USER_ACCOUNTS)
                    owner = os.fstat(folder)
                    os.fchown(f.fileno(), owner.st_uid, owner.st_gid)
                os.fchmod(f.fileno(), mode)  # whatever the umask
                f.write(text)
            os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
        finally:
            os.close(folder)
