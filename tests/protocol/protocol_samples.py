"""Shared sample jobs for the protocol tests (imported by name; no conftest needed)."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).parent / "examples"

V2_JOB: dict[str, Any] = {
    "protocolVersion": 2,
    "name": "demo",
    "type": "job",
    "prerequisites": [
        {"name": "image", "type": "dockerimage", "uri": "ubuntu:22.04"},
        {"name": "mnist", "type": "data", "uri": ["http://a/1", "http://a/2"]},
        {"name": "code", "type": "script", "uri": "github.com/a/b", "version": "v1",
         "contributor": "alice"},
        {"name": "out", "type": "output", "uri": "hdfs://out"},
    ],
    "parameters": {"model": "resnet", "epochs": 3},
    "secrets": {"token": "s3cret"},
    "taskRoles": {
        "worker": {
            "instances": 2,
            "dockerImage": "image",
            "data": "mnist",
            "script": "code",
            "output": "out",
            "resourcePerInstance": {"cpu": 1, "memoryMB": 1024, "gpu": 1, "ports": {"ssh": 1}},
            "commands": ["python train.py --model <% $parameters.model %>"],
        }
    },
    "deployments": [
        {
            "name": "prod",
            "taskRoles": {
                "worker": {
                    "preCommands": ["wget <% $data.uri[0] %>"],
                    "postCommands": ["echo done"],
                }
            },
        }
    ],
    "defaults": {"deployment": "prod"},
}  # fmt: skip

V1_JOB: dict[str, Any] = {
    "jobName": "demo.job~1",
    "image": "ubuntu:22.04",
    "taskRoles": [
        {
            "name": "main",
            "taskNumber": 2,
            "cpuNumber": 1,
            "memoryMB": 1024,
            "gpuNumber": 0,
            "command": "echo hi",
            "portList": [{"label": "http", "beginAt": 0, "portNumber": 1}],
        }
    ],
}

_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def changed(
    document: dict[str, Any], path: str | tuple[str | int, ...], value: object
) -> dict[str, Any]:
    """A copy of ``document`` with ``path`` ("a.b[0].c", or its keys as from ``places``) set
    to ``value`` (DELETE removes)."""
    result = copy.deepcopy(document)
    keys = [k if k else int(i) for k, i in _STEP.findall(path)] if isinstance(path, str) else path
    target: Any = result
    for key in keys[:-1]:
        target = target[key]
    if value is DELETE:
        del target[keys[-1]]
    else:
        target[keys[-1]] = value
    return result


def places(value: Any, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Every place in ``value`` (containers included) a value may be put, as its keys."""
    found = [path] if path else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += places(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += places(item, (*path, index))
    return found


DELETE = object()
