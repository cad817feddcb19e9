"""Job files for the runtime tests, and a way to see a finished job the way people do."""

from __future__ import annotations

import json
import textwrap
from typing import Any

from django.test import Client
from rest_framework.test import APIClient


def one_role(
    name: str, commands: list[str], extra: str = "", role: str = "taskrole_1", instances: int = 1
) -> str:
    """A job of one role whose tasks run ``commands``, each with an ssh port; ``extra`` (YAML)
    is appended."""
    lines = "\n".join(f"      - {json.dumps(c)}" for c in commands)
    return (
        textwrap.dedent(f"""\
        protocolVersion: 2
        name: {name}
        type: job
        prerequisites:
          - {{name: image, type: dockerimage, uri: "python:3.11"}}
        taskRoles:
          {role}:
            instances: {instances}
            dockerImage: image
            resourcePerInstance: {{cpu: 1, memoryMB: 128, gpu: 0, ports: {{ssh: 1}}}}
            commands:
        """)
        + lines
        + "\n"
        + textwrap.dedent(extra)
    )


def page_of(user: Any, job: Any) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(f"/jobs/{job.owner.username}~{job.name}/")
    assert response.status_code == 200
    return response.content.decode()


def api_of(user: Any, job: Any) -> dict[str, Any]:
    client = APIClient()
    client.force_authenticate(user)
    response = client.get(f"/api/v2/jobs/{job.owner.username}~{job.name}")
    assert response.status_code == 200, response.content
    body: dict[str, Any] = response.json()
    return body
