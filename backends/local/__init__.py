"""The local backend: tasks as processes on this machine (``backend``); what a task starts with
(``launch``) in its control directory (``taskdir``), its sandbox (``sandbox``) and image
(``images``); its process helpers (``process``), logs (``logs``), the listener of ended tasks
(``watch``) and the web terminal's pty (``pty``)."""

from backends.local.backend import DISAPPEARED, LocalBackend
from backends.local.launch import LocalBackendError

__all__ = ["DISAPPEARED", "LocalBackend", "LocalBackendError"]
