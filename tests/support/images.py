"""A tiny image for the tests of ``LOCAL_IMAGES=charliecloud``: Debian's busybox-static as its
/bin/sh and applets, imported with ``ch-image import`` into a storage of the test module's own (no
registry)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

IMAGE = "portal-test/busybox:1"
APPLETS = ("sh", "cat", "ls", "id", "echo", "readlink", "sleep", "pwd", "wc", "env", "grep")
APPLETS += ("kill", "touch", "mkdir", "printf", "nc", "date", "rm", "chmod", "tr", "sed", "head")


def build_busybox_image(storage: Path, name: str) -> None:
    """A tree with busybox-static as /bin/sh (and its applets), imported into ``storage``."""
    tree = Path(tempfile.mkdtemp(prefix="busybox-image-", dir="/var/tmp"))  # noqa: S108
    tree.chmod(0o755)  # the image's root: every task's uid enters it
    try:
        (tree / "bin").mkdir()
        (tree / "etc").mkdir()
        shutil.copy("/bin/busybox", tree / "bin" / "busybox")
        for applet in APPLETS:
            (tree / "bin" / applet).symlink_to("busybox")
        (tree / "etc" / "passwd").write_text("root:x:0:0:root:/:/bin/sh\n")
        (tree / "etc" / "group").write_text("root:x:0:\n")
        (tree / "etc" / "image-name").write_text("busybox-test-image\n")
        env = {"PATH": "/usr/bin:/bin", "USER": "portal", "CH_IMAGE_STORAGE": str(storage)}
        env["CH_IMAGE_CACHE"] = "disabled"  # no git build cache: it wants a git identity
        subprocess.run(  # noqa: S603
            ["ch-image", "import", str(tree), name],  # noqa: S607
            env=env,
            check=True,
            capture_output=True,
            timeout=120,
        )
    finally:
        shutil.rmtree(tree)


@pytest.fixture(scope="module")
def image_storage() -> Iterator[Path]:
    """A ch-image storage holding ``IMAGE``, readable by every task's uid."""
    top = Path(tempfile.mkdtemp(prefix="images-", dir="/var/tmp"))  # noqa: S108
    top.chmod(0o755)
    storage = top / "storage"  # ch-image makes it (it refuses an empty directory it did not)
    old = os.umask(0o022)  # the task's uid reads the image
    try:
        build_busybox_image(storage, IMAGE)
    finally:
        os.umask(old)
    yield storage
    shutil.rmtree(top, ignore_errors=True)
