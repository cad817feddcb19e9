"""A task's logs on this machine: ``stdout.log`` and ``stderr.log`` in its control directory,
read whole, by their tail or head, or in chunks (the local wrapper caps each, see
``backends.local.process``).

Where the task itself can write in the directory (Slurm's tasks, on the shared file system),
it could leave a symbolic link named ``stdout.log`` to a file of the portal's machine, or put a
link in the place of its directory, and read that file through its log page. So the files are
opened by ``open_beneath``: from a trusted ``root`` down, following no symbolic link.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from backends.base import LOG_CHUNK_BYTES

STREAMS = ("stdout", "stderr")


def log_path(control: Path, stream: str) -> Path:
    """The log of ``stream`` in the control directory; ValueError for another stream."""
    if stream not in STREAMS:
        raise ValueError(f"stream must be one of {STREAMS}, not {stream!r}")
    return control / f"{stream}.log"


def open_beneath(
    root: Path, parts: Sequence[str], flags: int = os.O_RDONLY, mode: int = 0o600
) -> int:
    """A descriptor of ``root / parts...`` opened with ``flags``, following no symbolic link
    below ``root`` (OSError, ELOOP or ENOTDIR, where one is)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            below = os.open(
                part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd
            )
            os.close(fd)
            fd = below
        return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=fd)
    finally:
        os.close(fd)


def _open(control: Path, stream: str, root: Path | None) -> BinaryIO | None:
    """The log opened for reading, or None when there is none (or it is not a plain file
    reached without a symbolic link below ``root``)."""
    path = log_path(control, stream)
    base = root or path.parent
    try:
        fd = open_beneath(base, path.relative_to(base).parts, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:  # none, or ELOOP: a symbolic link where the log or a directory should be
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO would hang the reader
        os.close(fd)
        return None
    return os.fdopen(fd, "rb")


def read_log(
    control: Path, stream: str, tail_bytes: int | None = None, root: Path | None = None
) -> bytes:
    if tail_bytes is not None and tail_bytes < 0:
        raise ValueError("tail_bytes must not be negative")
    log = _open(control, stream, root)
    if log is None:
        return b""
    with log:
        if tail_bytes is not None:
            size = log.seek(0, os.SEEK_END)
            log.seek(max(0, size - tail_bytes))
        return log.read()


def read_log_head(control: Path, stream: str, head_bytes: int, root: Path | None = None) -> bytes:
    log = _open(control, stream, root)
    if log is None:
        return b""
    with log:
        return log.read(max(0, head_bytes))


def log_chunks(
    control: Path, stream: str, chunk_bytes: int = LOG_CHUNK_BYTES, root: Path | None = None
) -> Iterator[bytes]:
    log = _open(control, stream, root)
    return iter(()) if log is None else _chunks_of(log, chunk_bytes)


def _chunks_of(log: BinaryIO, chunk_bytes: int) -> Iterator[bytes]:
    """The file's chunks up to its end as it is when read; closed at the end or when the
    consumer stops early."""
    with log:
        while chunk := log.read(chunk_bytes):
            yield chunk
