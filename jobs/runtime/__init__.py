"""What runs in each task: its environment (``env``) and its bootstrap script (``script``)."""

from jobs.runtime.env import JobContext, env_name, host_port, task_environment
from jobs.runtime.script import bootstrap_script, task_files

__all__ = [
    "JobContext",
    "bootstrap_script",
    "env_name",
    "host_port",
    "task_environment",
    "task_files",
]
