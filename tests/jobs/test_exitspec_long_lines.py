"""A task's log is the task's to write: one line of 64 KB without a space (``head -c 100M
/dev/zero``) once made two patterns of the exit spec backtrack for 90 s on this machine (15 min
under the VM's emulation), holding the reconcile pass of every user while it explained one exit.
Each pattern must read such a tail in linear time: here, every rule of the spec over adversarial
64 KB lines, in a child process that is killed if it has not finished in 60 s (it takes well
under a second now)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from jobs import exitspec

SIZE = exitspec.LOG_TAIL_BYTES
LINES = {
    "zeros": "\0" * SIZE,
    "one word": "a" * SIZE,
    "colons": "a:" * (SIZE // 2),
    "quotes": "'a" * (SIZE // 2),
    "spaces": "a " * (SIZE // 2),
}

EVERY_PATTERN = """\
import sys
from jobs import exitspec
line = sys.stdin.read()
for rule in exitspec.rules():
    for pattern in rule.patterns:
        for found in pattern.finditer(line):
            pass
print(exitspec.explain(1, "", line).id)
"""


@pytest.mark.parametrize("name", sorted(LINES))
def test_every_pattern_reads_a_long_line_without_a_newline_in_linear_time(name):
    done = subprocess.run(
        [sys.executable, "-c", EVERY_PATTERN],
        input=LINES[name],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "user-failure"
