"""docker-compose.yml on a real Docker engine: dockerd started when none answers, the images
built on a Debian base made here, the stack brought up with the README's commands.

Docker Hub is out of this machine's reach, so the compose file's base images (its build argument
``PYTHON_IMAGE`` and ``POSTGRES_IMAGE``, ``REDIS_IMAGE``) are stand-ins built from
``tests/compose/images/`` on a Debian 12 base made with ``mmdebstrap`` and ``docker import``
(about 40 s, once per machine: Docker keeps it). The portal's image is built from the
repository's own ``Dockerfile`` with BuildKit (Debian's ``/usr/bin/docker``, 20.10, has it
inside; the ``docker`` on ``PATH`` may need buildx) and this machine's CA bundle as the build
secret ``ca`` (its HTTPS to PyPI and npm goes through a proxy that re-signs). Compose itself is
Debian's ``docker-compose`` (1.29) where ``docker compose`` (v2) is missing, as on this machine.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.vm import SUITE, debian_mirrors

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ROOT / "tests" / "compose" / "images"
BASE = f"portal-ci/debian:{SUITE}"
STAND_INS = {"PYTHON_IMAGE": "python", "POSTGRES_IMAGE": "postgres", "REDIS_IMAGE": "redis"}
BUILDER = "/usr/bin/docker"  # Debian's docker.io client: BuildKit without buildx
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
DOCKERD_LOG = Path("/var/log/portal-dockerd.log")


def missing_tools() -> list[str]:
    """What this machine lacks to run the stack (``make docker`` installs it)."""
    needed = ["dockerd", BUILDER, "mmdebstrap"]
    missing = [tool for tool in needed if shutil.which(tool) is None]
    if not compose_command():
        missing.append("docker compose (v2) or docker-compose")
    if os.geteuid() != 0:
        missing.append("root (dockerd)")
    return missing


def compose_command() -> list[str]:
    """``docker compose`` where the v2 plugin answers, else Debian's ``docker-compose``."""
    for command in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(command[0]) is None:
            continue
        done = subprocess.run([*command, "version"], capture_output=True, check=False)
        if done.returncode == 0:
            return command
    return []


def run(argv: Sequence[str], timeout: float = 600, **kwargs: object) -> str:
    """``argv``'s output; AssertionError with its output when it fails."""
    done = subprocess.run(  # noqa: PLW1510 - checked below, with the output in the message
        list(argv), capture_output=True, text=True, timeout=timeout, **kwargs
    )
    if done.returncode != 0:
        raise AssertionError(
            f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}{done.stderr}"
        )
    return done.stdout


def ensure_dockerd() -> None:
    """A Docker engine that answers: this machine's, else one started here (it stays up, as
    the machine's PostgreSQL and Redis do, for the next run)."""
    if subprocess.run([BUILDER, "info"], capture_output=True, check=False).returncode == 0:
        return
    with DOCKERD_LOG.open("ab") as log:
        subprocess.Popen(["dockerd"], stdout=log, stderr=log, start_new_session=True)
    deadline = time.monotonic() + 60
    while subprocess.run([BUILDER, "info"], capture_output=True, check=False).returncode != 0:
        if time.monotonic() > deadline:
            raise AssertionError(f"dockerd did not answer in 60 s: see {DOCKERD_LOG}")
        time.sleep(0.5)


def ensure_base() -> None:
    """The Debian base image, made once with mmdebstrap from this machine's apt sources."""
    if subprocess.run([BUILDER, "image", "inspect", BASE], capture_output=True).returncode == 0:
        return
    mirrors = debian_mirrors()
    debootstrap = subprocess.Popen(
        ["mmdebstrap", "--variant=minbase", "--include=ca-certificates", SUITE, "-", *mirrors],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    run([BUILDER, "import", "-", BASE], stdin=debootstrap.stdout)
    assert debootstrap.wait() == 0, "mmdebstrap failed"


def build_images() -> dict[str, str]:
    """The stand-ins for the compose file's base images and the portal's image (``gpu-portal``,
    the name the compose file gives it); the variables that point the compose file at them."""
    ensure_base()
    env = {**os.environ, "DOCKER_BUILDKIT": "1"}
    chosen = {}
    for variable, name in STAND_INS.items():
        tag = f"portal-ci/{name}"
        dockerfile = str(IMAGES / f"{name}.Dockerfile")
        run(
            [
                BUILDER,
                "build",
                "-q",
                "--build-arg",
                f"BASE={BASE}",
                "-t",
                tag,
                "-f",
                dockerfile,
                str(IMAGES),
            ],
            env=env,
        )
        chosen[variable] = tag
    secret = ["--secret", f"id=ca,src={CA_BUNDLE}"] if CA_BUNDLE.exists() else []
    build_arg = ["--build-arg", f"PYTHON_IMAGE={chosen['PYTHON_IMAGE']}"]
    run(
        [BUILDER, "build", "-q", *build_arg, *secret, "-t", "gpu-portal", str(ROOT)],
        env=env,
        timeout=1200,
    )
    return chosen


@dataclass
class Stack:
    """A compose project brought up from the repository's docker-compose.yml."""

    project: str
    env: dict[str, str]
    url: str = ""
    admin_password: str = ""
    task_ports: range = field(default_factory=lambda: range(0))

    def compose(self, *args: str, timeout: float = 600) -> str:
        return run([*compose_command(), *args], timeout=timeout, cwd=ROOT, env=self.env)

    def shell(self, line: str, timeout: float = 600) -> str:
        """One of the README's command lines, with ``docker compose`` as this machine has it."""
        argv = line.split()
        assert argv[:2] == ["docker", "compose"], line
        return self.compose(*argv[2:], timeout=timeout)

    def wait_until_up(self, seconds: float = 240) -> None:
        import requests

        deadline = time.monotonic() + seconds
        while True:
            try:
                if requests.get(f"{self.url}/login/", timeout=5).status_code == 200:
                    return
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"the portal did not answer in {seconds} s:\n{self.logs()}")
            time.sleep(1)

    def logs(self, service: str = "portal") -> str:
        return self.compose("logs", "--no-color", service)

    def read_admin_password(self) -> str:
        found = re.search(r"'admin' with password: (\S+)", self.logs())
        assert found, f"no admin password in the portal's log:\n{self.logs()}"
        return found.group(1)

    def down(self) -> None:
        self.compose("down", "--volumes", "--remove-orphans", timeout=300)
