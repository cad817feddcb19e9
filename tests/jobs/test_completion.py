"""The completion policy, rule by rule."""

from __future__ import annotations

from jobs.lifecycle.completion import TaskView, decide


def protocol(**roles: tuple[int, int, int]) -> dict:
    """roles: name -> (instances, minFailedInstances, minSucceededInstances)."""
    return {
        "taskRoles": {
            name: {
                "instances": n,
                "completion": {"minFailedInstances": f, "minSucceededInstances": s},
            }
            for name, (n, f, s) in roles.items()
        }
    }


def t(role: str, index: int, state: str, code: int | None = None) -> TaskView:
    return TaskView(role, index, state, code)


def test_it_goes_on_while_tasks_run():
    assert decide(protocol(w=(2, 1, 2)), [t("w", 0, "SUCCEEDED", 0), t("w", 1, "RUNNING")]) is None


def test_one_failure_fails_under_min_failed_one():
    verdict = decide(protocol(w=(2, 1, 2)), [t("w", 0, "RUNNING"), t("w", 1, "FAILED", 2)])
    assert verdict is not None
    assert verdict.state == "FAILED"
    assert verdict.exit_code == 2
    assert "w-1 exited with code 2" in verdict.reason


def test_min_failed_minus_one_never_fails_and_all_done_succeeds():
    verdict = decide(protocol(w=(2, -1, -1)), [t("w", 0, "FAILED", 1), t("w", 1, "FAILED", 1)])
    assert verdict is not None
    assert verdict.state == "SUCCEEDED"


def test_min_succeeded_of_one_role_ends_the_job_while_others_run():
    tasks = [t("ps", 0, "RUNNING"), t("worker", 0, "SUCCEEDED", 0)]
    verdict = decide(protocol(ps=(1, 1, -1), worker=(1, 1, 1)), tasks)
    assert verdict is not None
    assert verdict.state == "SUCCEEDED"
    assert "worker" in verdict.reason


def test_two_failures_needed_under_min_failed_two():
    p = protocol(w=(3, 2, 3))
    assert decide(p, [t("w", 0, "FAILED", 1), t("w", 1, "RUNNING"), t("w", 2, "RUNNING")]) is None


def test_v1_kill_all_on_completed_task_number_ends_the_job():
    p = protocol(w=(3, -1, -1))
    p["extras"] = {"v1": {"killAllOnCompletedTaskNumber": 1}}
    verdict = decide(p, [t("w", 0, "SUCCEEDED", 0), t("w", 1, "RUNNING"), t("w", 2, "RUNNING")])
    assert verdict is not None
    assert verdict.state == "SUCCEEDED"
