"""The layers of DESIGN.md hold: import-linter's contracts pass, would fail on an import that
points up, run in ``make test``, and no function hides an import (as a dodge of a cycle)."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = str(Path(os.environ.get("VIRTUAL_ENV", ROOT / ".venv")) / "bin" / "lint-imports")
PACKAGES = ("protocol", "backends", "apikit", "clusters", "jobs", "accounts", "notify", "portal")
# Function-level imports with a reason other than a cycle: Django wants the Celery tasks
# registered in AppConfig.ready; a backend is imported only when settings choose it.
ALLOWED = {
    ("jobs/apps.py", "jobs"),
    ("notify/apps.py", "notify"),
    ("clusters/registry.py", "backends.local"),
    ("clusters/registry.py", "backends.kubernetes.api"),
    ("clusters/registry.py", "backends.kubernetes.backend"),
    ("clusters/registry.py", "backends.kubernetes.manifests"),
    ("clusters/registry.py", "backends.slurm.backend"),
    ("clusters/registry.py", "backends.slurm.commands"),
}


def lint_imports(where: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [LINT_IMPORTS, "--no-cache"], cwd=where, capture_output=True, text=True, check=False
    )


def test_make_test_checks_the_layers_before_the_tests():
    env = {k: v for k, v in os.environ.items() if k != "MAKEFLAGS"}
    dry = subprocess.run(
        ["make", "-n", "test"], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    lines = dry.stdout.splitlines()
    lint = next(i for i, line in enumerate(lines) if "bin/lint-imports" in line)
    tests = next(i for i, line in enumerate(lines) if "-m pytest" in line)
    assert lint < tests


def test_the_contracts_hold():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout
    assert "6 kept, 0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "bad_import", "broken"),
    [
        (
            "protocol/plain_json.py",
            "import django",
            "protocol is not allowed to import django",
        ),
        (
            "backends/local/backend.py",
            "from backends.kubernetes import api",
            "backends.local is not allowed to import backends.kubernetes",
        ),
        (
            "jobs/lifecycle/settle.py",
            "from jobs.views import detail",
            "jobs.lifecycle is not allowed to import jobs.views",
        ),
        ("jobs/models.py", "from jobs import access", "jobs.models is not allowed to import"),
        (
            "jobs/news.py",
            "from jobs import wakeup",
            "jobs.news is not allowed to import jobs.wakeup",
        ),
        (
            "jobs/lifecycle/finish.py",
            "from notify import outbox",
            "jobs is not allowed to import notify",
        ),
        (
            "clusters/overview.py",
            "from jobs.models import Job",
            "clusters is not allowed to import jobs",
        ),
    ],
)
def test_an_import_that_points_up_breaks_a_contract(tmp_path, module, bad_import, broken):
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    with (tmp_path / module).open("a") as f:
        f.write(f"\n{bad_import}  # noqa\n")
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert broken in result.stdout.replace("\n", " ")


def imports_in_functions(path: Path) -> list[str]:
    """The modules ``path`` imports inside a function body."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.Import):
                found += [alias.name for alias in inner.names]
            elif isinstance(inner, ast.ImportFrom):
                found.append(inner.module or "")
    return found


def test_no_function_hides_an_import():
    hidden = [
        (str(path.relative_to(ROOT)), module)
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts
        for module in imports_in_functions(path)
        if (str(path.relative_to(ROOT)), module) not in ALLOWED
    ]
    assert hidden == []
