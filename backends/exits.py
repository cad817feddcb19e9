"""What a task's exit code means, in words every backend uses for its diagnostics."""

from __future__ import annotations

import signal


def describe_exit(code: int) -> str:
    """``exited with code 3``, or ``killed by signal 9 (SIGKILL)`` for 128 + a signal number
    (what a shell and a container runtime report for a task a signal ended)."""
    if code > 128:
        try:
            sig = signal.Signals(code - 128)
        except ValueError:
            pass
        else:
            return f"killed by signal {sig.value} ({sig.name})"
    return f"exited with code {code}"
