"""jobEnvs names a task will not get are warnings at submission, not errors."""

from __future__ import annotations

from protocol import load_job
from tests.jobs.samples import hello_job


def test_a_v2_job_is_warned_of_job_envs_that_replace_system_names_or_are_no_names():
    text = hello_job() + 'extras:\n  jobEnvs: {PAI_JOB_NAME: x, QIZHI_A: y, "no-name": z, OK: v}\n'
    loaded = load_job(text)
    assert [w.split(":")[0] for w in loaded.warnings] == [
        "extras.jobEnvs.PAI_JOB_NAME",
        "extras.jobEnvs.QIZHI_A",
        "extras.jobEnvs.no-name",
    ]
    assert loaded.warnings[2].endswith("not a variable name; not set in the tasks")
    assert loaded.job["extras"]["jobEnvs"]["PAI_JOB_NAME"] == "x"  # kept as given


def test_a_job_whose_job_envs_are_all_usable_has_no_warning():
    assert load_job(hello_job() + "extras:\n  jobEnvs: {isDebug: true, LR: '0.1'}\n").warnings == []
