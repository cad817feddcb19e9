"""Processes of this machine found by their command line: a task's processes live in a pid
namespace of their own, so the pids a task prints are not this machine's."""

from __future__ import annotations

from pathlib import Path


def processes_running(argv: list[str]) -> list[int]:
    """Host pids of the live (not zombie) processes whose command line is exactly ``argv``."""
    wanted = "\0".join(argv).encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "cmdline").read_bytes() != wanted:
                continue
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
            found.append(int(entry.name))
    return found
