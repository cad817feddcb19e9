"""OpenPAI's tensorboard runtime plugin: which task starts TensorBoard and with what arguments
(its runtime's ``src/plugins/tensorboard``), the script part run under ``/bin/sh`` with a
stand-in ``tensorboard`` that says its version and records its arguments."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from jobs.plugins.tensorboard import tensorboard_start, tensorboard_stop


def job(parameters: dict[str, Any], ports: dict[str, int] | None = None) -> dict[str, Any]:
    role = {"instances": 2, "resourcePerInstance": {"ports": ports or {}}}
    plugin = {"plugin": "tensorboard", "parameters": parameters}
    return {
        "taskRoles": {"trainer": role, "evaluator": dict(role)},
        "extras": {"com.microsoft.pai.runtimeplugin": [plugin]},
    }


def started(tmp_path: Path, script: str, version: str = "2.15.1", **env: str) -> tuple[str, str]:
    """(the arguments the stand-in tensorboard got, what the script said)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "tensorboard"
    fake.write_text(
        f'#!/bin/sh\ncase "$1" in --version_tb) echo {version}; exit 0 ;; esac\n'
        f'echo "$@" > {tmp_path}/args\n'
    )
    fake.chmod(0o755)
    prelude = 'portal_say() { echo "[portal] $*" >&2; }\n'
    done = subprocess.run(  # "wait": until the background tensorboard has written its arguments
        ["/bin/sh", "-c", prelude + script + "wait\n"],
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "PAI_WORK_DIR": str(tmp_path), **env},
        capture_output=True,
        text=True,
        check=True,
    )
    args = (tmp_path / "args").read_text().strip() if (tmp_path / "args").exists() else ""
    return args, done.stderr


FIRST = {"PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX": "0"}


def test_tensorboard_2_reads_its_one_logdir_on_the_plugins_port(tmp_path):
    script = tensorboard_start(job({"port": 11449, "logdir": {"path": "/mnt/tb"}}), "trainer")
    args, said = started(tmp_path, script, **FIRST)
    assert args == "--logdir=/mnt/tb --bind_all --port=11449"
    assert "tensorboard: started on port 11449" in said


def test_several_logdirs_are_a_logdir_spec_and_tensorboard_1_gets_them_as_logdir(tmp_path):
    protocol = job({"port": 6006, "logdir": {"a": "/runs/a", "b": "/runs/b"}})
    args, _ = started(tmp_path, tensorboard_start(protocol, "trainer"), **FIRST)
    assert args == "--logdir_spec=a:/runs/a,b:/runs/b --bind_all --port=6006"
    (tmp_path / "args").unlink()
    args, _ = started(tmp_path, tensorboard_start(protocol, "trainer"), "1.15.0", **FIRST)
    assert args == "--logdir=a:/runs/a,b:/runs/b --port=6006"


def test_without_a_port_it_uses_the_tasks_tensorboard_port(tmp_path):
    protocol = job({"logdir": {"path": "/mnt/tb"}}, ports={"tensorboard": 1})
    env = {**FIRST, "PAI_CONTAINER_HOST_tensorboard_PORT_LIST": "31000"}
    args, _ = started(tmp_path, tensorboard_start(protocol, "trainer"), **env)
    assert args == "--logdir=/mnt/tb --bind_all --port=31000"


@pytest.mark.parametrize(
    ("role", "index"), [("trainer", "1"), ("evaluator", "0")], ids=["second_task", "second_role"]
)
def test_only_the_first_task_of_the_first_role_starts_it(tmp_path, role, index):
    protocol = job({"port": 6006, "logdir": {"path": "/mnt/tb"}})
    script = tensorboard_start(protocol, role)
    args, said = started(tmp_path, script, PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX=index)
    assert (args, said) == ("", "")
    assert bool(tensorboard_stop(protocol, role)) == (role == "trainer")


def test_an_image_without_tensorboard_says_so_and_goes_on(tmp_path):
    script = tensorboard_start(job({"port": 6006, "logdir": {"path": "/x"}}), "trainer")
    done = subprocess.run(
        ["/bin/sh", "-c", 'portal_say() { echo "$*" >&2; }\n' + script + "echo went on\n"],
        env={"PATH": "/nonexistent", **FIRST},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == "went on\n"
    assert "tensorboard: no tensorboard in the image: not started" in done.stderr


def test_a_plugin_without_logdir_says_so():
    assert "names no logdir" in tensorboard_start(job({"port": 6006}), "trainer")


def test_a_job_without_the_plugin_gets_nothing():
    protocol = {"taskRoles": {"trainer": {}}, "extras": {}}
    assert tensorboard_start(protocol, "trainer") == tensorboard_stop(protocol, "trainer") == ""
