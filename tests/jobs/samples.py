"""Small job files the tests submit."""

from __future__ import annotations

import textwrap
from typing import Any


def hello_job(name: str = "hello", command: str = "echo hello", secrets: str = "") -> str:
    """A one-task v2 job with an ``http`` port; ``secrets`` is a YAML flow mapping."""
    return textwrap.dedent(f"""\
        protocolVersion: 2
        name: {name}
        type: job
        prerequisites: [{{name: img, type: dockerimage, uri: python}}]
        secrets: {secrets or "{}"}
        taskRoles:
          main:
            dockerImage: img
            resourcePerInstance: {{cpu: 1, memoryMB: 128, gpu: 0, ports: {{http: 1}}}}
            commands: ["{command}"]
        """)


def v1_job(name: str, command: str, **fields: Any) -> dict[str, Any]:
    """A one-task v1 JSON job (as a dict), with any other top-level ``fields``."""
    role = {
        "name": "main",
        "taskNumber": 1,
        "cpuNumber": 1,
        "memoryMB": 128,
        "gpuNumber": 0,
        "command": command,
    }
    return {"jobName": name, "image": "python:3.11", **fields, "taskRoles": [role]}
