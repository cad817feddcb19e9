"""A task's logs on this machine: ``stdout.log`` and ``stderr.log`` in its control directory,
read whole, by their tail or head, or in chunks (the wrapper caps each, see ``process``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from backends.base import LOG_CHUNK_BYTES

STREAMS = ("stdout", "stderr")


def log_path(control: Path, stream: str) -> Path:
    """The log of ``stream`` in the control directory; ValueError for another stream."""
    if stream not in STREAMS:
        raise ValueError(f"stream must be one of {STREAMS}, not {stream!r}")
    return control / f"{stream}.log"


def read_log(control: Path, stream: str, tail_bytes: int | None = None) -> bytes:
    path = log_path(control, stream)
    if tail_bytes is not None and tail_bytes < 0:
        raise ValueError("tail_bytes must not be negative")
    try:
        with path.open("rb") as f:
            if tail_bytes is not None:
                size = f.seek(0, os.SEEK_END)
                f.seek(max(0, size - tail_bytes))
            return f.read()
    except FileNotFoundError:
        return b""


def read_log_head(control: Path, stream: str, head_bytes: int) -> bytes:
    try:
        with log_path(control, stream).open("rb") as f:
            return f.read(max(0, head_bytes))
    except FileNotFoundError:
        return b""


def log_chunks(control: Path, stream: str, chunk_bytes: int = LOG_CHUNK_BYTES) -> Iterator[bytes]:
    try:
        log = log_path(control, stream).open("rb")
    except FileNotFoundError:
        return iter(())
    return _chunks_of(log, chunk_bytes)


def _chunks_of(log: BinaryIO, chunk_bytes: int) -> Iterator[bytes]:
    """The file's chunks up to its end as it is when read; closed at the end or when the
    consumer stops early."""
    with log:
        while chunk := log.read(chunk_bytes):
            yield chunk
