"""The ssh plugin inside a task: the job's keys and an ssh config for every ``<role>-<index>``
in ``$PAI_WORK_DIR/.ssh``, and the image's sshd started on the task's ``ssh`` port.

Part of the bootstrap script (``jobs.runtime.script``), in POSIX sh.
"""

from __future__ import annotations

import shlex

from jobs import plugins
from jobs.runtime.env import JobContext, env_name

# sshd reads one SetEnv line only, and a session with about 1000 variables is refused.
SSHD_MAX_VARIABLES = 900

# The image's sshd on the task's ``ssh`` port (``PAI_CONTAINER_SSH_PORT``), for
# ``ssh <role>-<index>`` from the other tasks and for the user's key: a host key of its own
# (ssh-keygen, ed25519; else the image's), its config, pid file and log in ``$portal_ssh``.
# Sessions get the task's environment (SetEnv; dropped, with a note, by an sshd too old for it).
# It runs in the background but not as a daemon (``-D``): it stays in the task's process group,
# which the local backend kills when the task ends, and the exit trap stops it as well.
# No sshd, no ssh port, no host key: it says why and the task goes on without.
SSHD = r"""portal_nl='
'
portal_sshd_quote() {
  portal_rest=$1 portal_q=""
  while :; do
    case "$portal_rest" in
      *[\\\"]*) ;;
      *) portal_q="$portal_q$portal_rest"; return 0 ;;
    esac
    portal_pre=${portal_rest%%[\\\"]*}
    portal_rest=${portal_rest#"$portal_pre"}
    portal_q="$portal_q$portal_pre\\${portal_rest%"${portal_rest#?}"}"
    portal_rest=${portal_rest#?}
  done
}
portal_sshd_env() {
  portal_setenv="" portal_count=0 portal_left=0 portal_skipped=""
  if command -v env >/dev/null 2>&1; then
    portal_names=$(env | while IFS= read -r portal_line; do
      case "$portal_line" in [A-Za-z_]*=*) ;; *) continue ;; esac
      portal_name=${portal_line%%=*}
      case "$portal_name" in *[!A-Za-z0-9_]*) continue ;; esac
      echo "$portal_name"
    done)
  else
    portal_names="@NAMES@"
  fi
  for portal_pass in 1 2; do
    for portal_name in $portal_names; do
      case "$portal_name" in
        HOME|USER|LOGNAME|SHELL|PWD|OLDPWD|SHLVL|TERM|MAIL|_) continue ;;
        IFS|PS1|PS2|PS4|OPTIND|PPID|SSH_*|portal_*) continue ;;
        PAI_HOST_IP_*|PAI_PORT_LIST_*|QIZHI_HOST_IP_*|QIZHI_PORT_LIST_*)
          [ "$portal_pass" = 2 ] || continue ;;
        *) [ "$portal_pass" = 1 ] || continue ;;
      esac
      eval "[ -n \"\${$portal_name+x}\" ]" || continue
      eval "portal_value=\$$portal_name"
      case "$portal_value" in
        *"$portal_nl"*) portal_skipped="$portal_skipped $portal_name"; continue ;;
      esac
      if [ "$portal_count" -ge @MAX@ ]; then
        portal_left=$((portal_left + 1))
        continue
      fi
      portal_sshd_quote "$portal_name=$portal_value"
      portal_setenv="$portal_setenv \"$portal_q\""
      portal_count=$((portal_count + 1))
    done
  done
  [ -z "$portal_skipped" ] ||
    portal_say "ssh: sessions do not get$portal_skipped (a value with a newline)"
  [ "$portal_left" -eq 0 ] ||
    portal_say "ssh: sessions get @MAX@ of the task's variables, $portal_left left out"
}
portal_sshd_config() {
  (umask 077 && {
    echo "# The sshd of task $portal_task, written by its bootstrap script."
    echo "Port $PAI_CONTAINER_SSH_PORT"
    [ -z "$portal_listen" ] || echo "ListenAddress $portal_listen"
    printf '%s\n' "$portal_hostkeys"
    portal_sshd_quote "$portal_ssh/authorized_keys"
    echo "AuthorizedKeysFile \"$portal_q\""
    portal_sshd_quote "$portal_ssh/sshd.pid"
    echo "PidFile \"$portal_q\""
    echo "StrictModes no"
    echo "UsePAM no"
    echo "PubkeyAuthentication yes"
    echo "PasswordAuthentication no"
    echo "KbdInteractiveAuthentication no"
    echo "PermitRootLogin prohibit-password"
    echo "PrintMotd no"
    echo "Subsystem sftp internal-sftp"
    [ -z "$1" ] || echo "SetEnv$1"
  } > "$portal_ssh/sshd_config")
}
portal_sshd_log() {
  printf '%s\n' "$1" | while IFS= read -r portal_line; do
    [ -z "$portal_line" ] || portal_say "ssh: sshd: $portal_line"
  done
}
portal_sshd() {
  portal_sshd_bin=$(command -v sshd 2>/dev/null) || portal_sshd_bin=""
  case "$portal_sshd_bin" in /*) ;; *) portal_sshd_bin="" ;; esac
  if [ -z "$portal_sshd_bin" ] && [ -x /usr/sbin/sshd ]; then portal_sshd_bin=/usr/sbin/sshd; fi
  if [ -z "$portal_sshd_bin" ]; then
    portal_say "ssh: no sshd in the image: not started, nobody can ssh into this task"
    return 0
  fi
  if [ -z "${PAI_CONTAINER_SSH_PORT:-}" ]; then
    portal_say "ssh: sshd not started: the task role has no ssh port (ports: {ssh: 1})"
    return 0
  fi
  portal_hostkeys=""
  if command -v ssh-keygen >/dev/null 2>&1; then
    portal_key="$portal_ssh/ssh_host_ed25519_key"
    [ -f "$portal_key" ] ||
      ssh-keygen -q -t ed25519 -N "" -C "$portal_task" -f "$portal_key" </dev/null >/dev/null ||
      portal_say "ssh: ssh-keygen could not make a host key"
    if [ -f "$portal_key" ]; then
      portal_sshd_quote "$portal_key"
      portal_hostkeys="HostKey \"$portal_q\""
    fi
  fi
  if [ -z "$portal_hostkeys" ]; then
    for portal_key in /etc/ssh/ssh_host_ed25519_key /etc/ssh/ssh_host_ecdsa_key \
        /etc/ssh/ssh_host_rsa_key; do
      [ ! -r "$portal_key" ] ||
        portal_hostkeys="$portal_hostkeys${portal_hostkeys:+$portal_nl}HostKey $portal_key"
    done
  fi
  if [ -z "$portal_hostkeys" ]; then
    portal_say "ssh: sshd not started: no ssh-keygen for a host key and none in /etc/ssh"
    return 0
  fi
  # sshd started by root wants its privilege separation directory (Debian: /run/sshd).
  [ -d /run/sshd ] || { mkdir -p /run/sshd && chmod 755 /run/sshd; } 2>/dev/null || :
  case "${PAI_CONTAINER_HOST_IP:-}" in
    127.*|::1|localhost) portal_listen=$PAI_CONTAINER_HOST_IP ;;
    *) portal_listen="" ;;  # every address: the other tasks and the user come from outside
  esac
  portal_sshd_env
  portal_sshd_config "$portal_setenv"
  if ! portal_out=$("$portal_sshd_bin" -t -f "$portal_ssh/sshd_config" 2>&1); then
    portal_sshd_config ""
    if ! portal_out=$("$portal_sshd_bin" -t -f "$portal_ssh/sshd_config" 2>&1); then
      portal_say "ssh: sshd not started: $portal_sshd_bin rejects its configuration"
      portal_sshd_log "$portal_out"
      return 0
    fi
    portal_say "ssh: this sshd takes no SetEnv: ssh sessions lack the task's environment"
  fi
  rm -f "$portal_ssh/sshd.pid"
  "$portal_sshd_bin" -D -f "$portal_ssh/sshd_config" -E "$portal_ssh/sshd.log" \
    </dev/null >/dev/null 2>&1 &
  portal_sshd_pid=$!
  portal_sshd_waited=0
  while [ ! -s "$portal_ssh/sshd.pid" ] && [ "$portal_sshd_waited" -lt 50 ] &&
      kill -0 "$portal_sshd_pid" 2>/dev/null; do
    sleep 0.1 2>/dev/null || sleep 1
    portal_sshd_waited=$((portal_sshd_waited + 1))
  done
  if kill -0 "$portal_sshd_pid" 2>/dev/null; then
    portal_say "ssh: sshd (pid $portal_sshd_pid) listens on port $PAI_CONTAINER_SSH_PORT," \
      "log in $portal_ssh/sshd.log"
  else
    portal_sshd_pid=""
    portal_say "ssh: sshd did not start"
    [ ! -f "$portal_ssh/sshd.log" ] || portal_sshd_log "$(cat "$portal_ssh/sshd.log")"
  fi
}
portal_sshd
""".replace("@MAX@", str(SSHD_MAX_VARIABLES))

SSHD_STOP = """  if [ -n "${portal_sshd_pid:-}" ]; then kill "$portal_sshd_pid" 2>/dev/null; fi
"""


def ssh_keys(ctx: JobContext) -> list[str]:
    """The public keys the ssh plugin lets in: the job's (``jobssh``) and the user's."""
    jobssh, user_key = plugins.ssh_options(ctx.protocol)
    return [k for k in (ctx.ssh_public_key if jobssh else "", user_key) if k]


def ssh_on(ctx: JobContext) -> bool:
    """Whether the ssh plugin sets anything up in the task (and starts its sshd)."""
    return bool(ssh_keys(ctx))


def ssh_setup(ctx: JobContext, env: dict[str, str] | None = None) -> str:
    """The job's key pair in ``$PAI_WORK_DIR/.ssh`` (authorized_keys, config for every
    ``<role>-<index>``, an ``ssh`` wrapper first on PATH that uses that config), then the
    image's sshd started on the task's ``ssh`` port (``SSHD``; ``env`` names the variables
    its sessions get where the image has no ``env`` command to list them)."""
    jobssh = plugins.ssh_options(ctx.protocol)[0]
    keys = ssh_keys(ctx)
    if not keys:
        return ""
    lines = [
        'portal_ssh="$PAI_WORK_DIR/.ssh"',
        'mkdir -p "$portal_ssh/bin" && chmod 700 "$portal_ssh"',
        f"printf '%s\\n' {' '.join(shlex.quote(k) for k in keys)} "
        '> "$portal_ssh/authorized_keys"',
        'chmod 600 "$portal_ssh/authorized_keys"',
        ': > "$portal_ssh/config"',
    ]
    if jobssh and ctx.ssh_private_key:  # id_job itself is a task file (``task_files``)
        lines.append(
            f"printf '%s\\n' {shlex.quote(ctx.ssh_public_key)} > \"$portal_ssh/id_job.pub\""
        )
    for role, spec in ctx.protocol["taskRoles"].items():
        for index in range(spec["instances"]):
            key = f"{env_name(role)}_{index}"
            lines.append(
                f"printf 'Host %s\\n  HostName %s\\n  Port %s\\n  IdentityFile %s\\n"
                "  StrictHostKeyChecking no\\n  UserKnownHostsFile /dev/null\\n' "
                f'{shlex.quote(f"{role}-{index}")} "$PAI_HOST_IP_{key}" '
                f'"${{PAI_PORT_LIST_{key}_ssh:-22}}" "$portal_ssh/id_job" >> "$portal_ssh/config"'
            )
    lines += [
        "if command -v ssh >/dev/null 2>&1; then",
        '  printf \'#!/bin/sh\\nexec %s -F %s "$@"\\n\' "$(command -v ssh)" '
        '"$portal_ssh/config" > "$portal_ssh/bin/ssh"',
        '  chmod 755 "$portal_ssh/bin/ssh"',
        '  export PATH="$portal_ssh/bin:$PATH"',
        "fi",
        'export PAI_SSH_CONFIG="$portal_ssh/config"',
        'portal_say "ssh: keys and config in $portal_ssh"',
    ]
    names = " ".join(["PATH", "PAI_WORK_DIR", "PAI_SSH_CONFIG", *(env or {})])
    return "\n".join(lines) + "\n" + SSHD.replace("@NAMES@", names)
