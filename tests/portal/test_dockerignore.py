"""The Docker build context leaves out secrets, local state and the virtual environment."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def docker_pattern(pattern: str) -> re.Pattern[str]:
    """A .dockerignore line as Docker reads it: ``**`` any number of directories, ``*`` and
    ``?`` within one path segment."""
    regex = ""
    for part in re.split(r"(\*\*/|\*\*|\*|\?)", pattern.strip("/")):
        regex += {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}.get(
            part, re.escape(part)
        )
    return re.compile(regex)


def ignored(path: str) -> bool:
    """Whether Docker leaves ``path`` out: a pattern matches it or one of its directories."""
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    patterns = [docker_pattern(x) for x in lines if x.strip() and not x.startswith("#")]
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(p.fullmatch(prefix) for p in patterns for prefix in prefixes)


@pytest.mark.parametrize(
    "path",
    [
        ".venv/bin/python",
        "node_modules/htmx.org/dist/htmx.min.js",
        "var/secret_key",
        "var/portal.sqlite3",
        ".git/config",
        "jobs/__pycache__/models.cpython-311.pyc",
        "protocol/__pycache__/load.cpython-311.pyc",
        ".pytest_cache/v/cache/nodeids",
        "db.sqlite3",
        "tests/leftover.sqlite3",
    ],
)
def test_the_image_gets_no_secret_state_or_environment(path):
    assert ignored(path)


@pytest.mark.parametrize(
    "path", ["manage.py", "jobs/models.py", "package.json", "templates/base.html", "static/x.css"]
)
def test_the_image_gets_the_code(path):
    assert not ignored(path)
