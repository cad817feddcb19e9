"""The local backend: tasks as processes on this machine (``backend``); what a task starts with
(``launch``) in its control directory (``taskdir``), its sandbox (``sandbox``) and image
(``images``) and its process helpers (``process``). Its logs (``backends.logfiles``), the
listener of ended tasks (``backends.ended``) and the web terminal's pty (``backends.pty``) are
shared with the Slurm backend."""

from backends.local.backend import DISAPPEARED, LocalBackend
from backends.local.launch import LocalBackendError

__all__ = ["DISAPPEARED", "LocalBackend", "LocalBackendError"]
