"""The README's first job parses and fits a 2-core machine with little memory."""

from __future__ import annotations

from protocol import load_job
from tests.readme import first_job


def test_the_readmes_first_job_parses_and_fits_two_cores():
    job = load_job(first_job()).job
    roles = job["taskRoles"].values()
    assert sum(r["instances"] * r["resourcePerInstance"]["cpu"] for r in roles) <= 2
    assert sum(r["instances"] * r["resourcePerInstance"]["memoryMB"] for r in roles) <= 1024


def test_the_readmes_first_job_shows_both_roles_host_lists():
    job = load_job(first_job()).job
    commands = "\n".join(c for r in job["taskRoles"].values() for c in r["commands"])
    assert "$PAI_TASK_ROLE_worker_HOST_LIST" in commands
    assert "$PAI_TASK_ROLE_ps_server_HOST_LIST" in commands
    assert all(r["completion"]["minSucceededInstances"] == -1 for r in job["taskRoles"].values())
