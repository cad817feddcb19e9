"""Small job files the tests submit."""

from __future__ import annotations

import textwrap


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
