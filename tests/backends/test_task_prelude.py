"""The sandbox's prelude (``backends/local/prelude.c``), run on its own with the arguments
``sandbox.task_command`` gives it: what a task has been given before setpriv and bwrap run. The
sandbox's own tests (``test_sandbox.py``, ``test_limits.py``, ``tests/runtime``) cover what a task
can reach through the whole chain."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from backends.local.sandbox import PRELUDE, SYSTEM_PATH

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="the gates need root (CI runs as root)")


def prelude(
    tmp_path: Path, script: str, *, nofile: str = "", procs: list[str] = (), gates: list[str] = ()
) -> subprocess.CompletedProcess[str]:
    """Run the prelude with a bootstrap and a passwd file, then ``sh -c script``."""
    (tmp_path / "boot.sh").write_text("the bootstrap\n")
    (tmp_path / "passwd").write_text("the passwd\n")
    argv = [str(PRELUDE), nofile, "", str(tmp_path / "boot.sh"), str(tmp_path / "passwd")]
    argv += [*procs, "--", *gates, "sh", "-c", script]
    return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, check=False)


def test_it_sets_the_open_files_limit_soft_and_hard_and_opens_what_bwrap_reads(tmp_path: Path):
    done = prelude(
        tmp_path,
        'ulimit -Sn; ulimit -Hn; cat <&8; cat <&9; readlink /proc/$$/fd/6; echo "PATH=$PATH"',
        nofile="321",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "321",
        "321",
        "the bootstrap",
        "the passwd",
        str(tmp_path / "sandbox.json"),
        f"PATH={SYSTEM_PATH}",  # prelude.c's copy of it
    ]


def test_the_task_joins_its_cgroups_before_anything_of_it_runs(tmp_path: Path):
    """Its pid is in each ``cgroup.procs`` (plain files here) when its command starts."""
    procs = [tmp_path / "memory.procs", tmp_path / "cpu.procs"]
    for path in procs:
        path.write_text("")
    done = prelude(tmp_path, "echo $$; cat memory.procs cpu.procs", procs=[str(p) for p in procs])
    assert done.returncode == 0, done.stderr
    pid, *joined = done.stdout.split()
    assert joined == [pid, pid]


def test_a_step_that_fails_ends_the_task_with_125_and_says_why(tmp_path: Path):
    missing = tmp_path / "gone" / "cgroup.procs"
    done = prelude(tmp_path, "touch ran", procs=[str(missing)])
    assert done.returncode == 125
    assert done.stderr == (
        f"[portal] the sandbox could not be set up: joining {missing}: No such file or directory\n"
    )
    assert not (tmp_path / "ran").exists()


@as_root
def test_the_gates_and_the_detached_root_are_seen_by_the_task_only(tmp_path: Path):
    """Run in a mount namespace of the test's own, so that nothing can leak to this host's."""
    source, gate, root = tmp_path / "source", tmp_path / "gate", tmp_path / "root"
    for path in (source, gate, root):
        path.mkdir()
    (source / "file").write_text("through the gate\n")
    script = f"cat {gate}/file; grep -c ' {root} ' /proc/self/mountinfo || true"
    gates = ["--gates", str(source), str(gate), "--", "--detach", str(root)]
    argv = [
        str(PRELUDE),
        *("", "", "/dev/null", "/dev/null", "--"),
        *gates,
        *("sh", "-c", script),
    ]
    outside = f"grep -c ' {root} ' /proc/self/mountinfo; ls {gate}"
    host = f'mount --bind {root} {root} && "$@" && echo after && {outside}'  # the task root a mount
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", host, "host", *argv],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # In the task: the gate shows the source, the task root is gone; outside: the other way.
    assert done.stdout.splitlines() == ["through the gate", "0", "after", "1"]


@as_root
def test_a_gate_that_cannot_be_bound_ends_the_task_with_125(tmp_path: Path):
    gates = ["--gates", str(tmp_path / "no-such-source"), str(tmp_path), "--"]
    done = prelude(tmp_path, "touch ran", gates=gates)
    assert done.returncode == 125
    assert "binding" in done.stderr and "No such file or directory" in done.stderr
    assert not (tmp_path / "ran").exists()
