"""OpenPAI's ``tensorboard`` runtime plugin: the first task of the job's first task role starts
the image's TensorBoard in the background, on the plugin's ``port``, reading the plugin's
``logdir`` (``{name: path}``), as OpenPAI's runtime does (``src/plugins/tensorboard``):
TensorBoard 1 gets ``--logdir=name:path,...``; 2 gets ``--logdir=path --bind_all`` for one
directory and ``--logdir_spec=name:path,... --bind_all`` for several. Without a ``port`` it
uses the task's ``tensorboard`` port when it declares one. A plugin it cannot start (no
``tensorboard`` in the image, no port, no logdir) is said in the log and the task goes on."""

from __future__ import annotations

import shlex
from typing import Any

from jobs import plugins

START = """if [ "$PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX" = 0 ]; then
  portal_tb_port=%(port)s
  if ! command -v tensorboard >/dev/null 2>&1; then
    portal_say "tensorboard: no tensorboard in the image: not started"
  elif [ -z "$portal_tb_port" ]; then
    portal_say "tensorboard: no port (parameters.port, or ports: {tensorboard: 1}): not started"
  else
    case "$(tensorboard --version_tb 2>/dev/null)" in
      1*) set -- --logdir=%(spec)s ;;
      *) set -- %(logdir_v2)s --bind_all ;;
    esac
    tensorboard "$@" --port="$portal_tb_port" >"$PAI_WORK_DIR/tensorboard.log" 2>&1 &
    portal_tb_pid=$!
    portal_say "tensorboard: started on port $portal_tb_port (log in $PAI_WORK_DIR/tensorboard.log)"
  fi
fi
"""

STOP = """  if [ -n "${portal_tb_pid:-}" ]; then kill "$portal_tb_pid" 2>/dev/null; fi
"""


def tensorboard_parameters(protocol: dict[str, Any], role: str) -> dict[str, Any] | None:
    """The plugin's parameters when it runs in ``role`` (the job's first task role), else None."""
    if role != next(iter(protocol["taskRoles"])):
        return None
    for entry in plugins.runtime_plugins(protocol, role):
        if entry["plugin"] == "tensorboard":
            return plugins.parameters(entry)
    return None


def tensorboard_start(protocol: dict[str, Any], role: str) -> str:
    params = tensorboard_parameters(protocol, role)
    if params is None:
        return ""
    logdir = params.get("logdir")
    if not isinstance(logdir, dict) or not logdir:
        return 'portal_say "tensorboard: the plugin names no logdir: not started"\n'
    spec = ",".join(f"{name}:{path}" for name, path in logdir.items())
    if len(logdir) == 1:
        logdir_v2 = f"--logdir={next(iter(logdir.values()))}"
    else:
        logdir_v2 = f"--logdir_spec={spec}"
    port = params.get("port")
    given = str(port) if isinstance(port, int) and not isinstance(port, bool) else ""
    return START % {
        "port": shlex.quote(given)
        if given
        else '"${PAI_CONTAINER_HOST_tensorboard_PORT_LIST%%,*}"',
        "spec": shlex.quote(spec),
        "logdir_v2": shlex.quote(logdir_v2),
    }


def tensorboard_stop(protocol: dict[str, Any], role: str) -> str:
    return STOP if tensorboard_parameters(protocol, role) is not None else ""
