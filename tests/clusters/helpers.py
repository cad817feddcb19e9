"""Small job files and virtual clusters for the quota tests."""

from __future__ import annotations

import json

from clusters.models import Node, VirtualCluster


def job_text(
    name: str,
    cpu: int = 1,
    gpu: int = 0,
    command: str = "sleep 30",
    memory_mb: int = 64,
    ports: dict[str, int] | None = None,
    **extras: object,
) -> str:
    """A job of one role ``main``, one task, running ``command`` (JSON: YAML reads it too)."""
    resources = {
        "cpu": cpu,
        "memoryMB": memory_mb,
        "gpu": gpu,
        **({"ports": ports} if ports else {}),
    }
    return json.dumps(
        {
            "protocolVersion": 2,
            "name": name,
            "type": "job",
            "prerequisites": [{"name": "image", "type": "dockerimage", "uri": "python:3.11"}],
            "taskRoles": {
                "main": {
                    "instances": 1,
                    "dockerImage": "image",
                    "resourcePerInstance": resources,
                    "commands": [command],
                }
            },
            "extras": extras,
        }
    )


def cluster(cpu: int = 8, memory_mb: int = 64_000, gpus: dict[str, int] | None = None) -> Node:
    return Node.objects.create(name="node-1", cpu=cpu, memory_mb=memory_mb, gpus=gpus or {})


def vc(name: str, *members: object, **quota: object) -> VirtualCluster:
    made = VirtualCluster.objects.create(name=name, **quota)
    made.members.set(members)
    return made
