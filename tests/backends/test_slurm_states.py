"""Slurm's reasons and end states in the portal's words (``backends/slurm/states.py``)."""

from __future__ import annotations

import pytest

from backends.slurm.states import ended_without_exit, waiting_reason
from jobs import exitspec


@pytest.mark.parametrize(
    ("reason", "words"),
    [
        ("Resources", "Slurm: waiting for free resources in its partition (Resources)"),
        ("Priority", "Slurm: waiting behind jobs of higher priority in its partition (Priority)"),
        (
            "QOSMaxCpuPerUserLimit",
            "Slurm: waiting: its QOS's cpu limit per user is reached (QOSMaxCpuPerUserLimit)",
        ),
        (
            "AssocGrpGRES",
            "Slurm: waiting: its account's group gres limit is reached (AssocGrpGRES)",
        ),
        (
            "AssocGrpCpuLimit",
            "Slurm: waiting: its account's group cpu limit is reached (AssocGrpCpuLimit)",
        ),
        ("None", "Slurm: queued by Slurm"),
    ],
)
def test_why_slurm_holds_a_job_is_said_in_words(reason: str, words: str) -> None:
    assert waiting_reason(reason) == words


@pytest.mark.parametrize(
    ("state", "rule"),
    [
        ("OUT_OF_MEMORY", "oom-killed"),
        ("NODE_FAIL", "node-lost"),
        ("PREEMPTED", "preempted"),
    ],
)
def test_a_job_that_ended_without_an_exit_code_is_explained_by_the_exit_spec(
    state: str, rule: str
) -> None:
    found = exitspec.explain(None, ended_without_exit(state, "None"))
    assert found is not None and found.id == rule
