"""The local backend: tasks as processes on this machine (``backend``), their process and file
helpers (``process``) and the web terminal's pty (``pty``)."""

from clusters.backends.local.backend import DISAPPEARED, LocalBackend, LocalBackendError

__all__ = ["DISAPPEARED", "LocalBackend", "LocalBackendError"]
