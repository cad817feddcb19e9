"""The same failure gets OpenPAI's code and type (its k8s-job-exit-spec), with our phrase."""

from __future__ import annotations

import pytest

from jobs.exitspec import explain, openpai_exit

TRACEBACK = "Traceback (most recent call last):\n  File t.py, line 1\n{}\n"

CASES = [
    # (exit code, backend diagnostics, log, stopped) -> OpenPAI code, type
    ((137, "OOMKilled", "", False), -1200, "USER_FAILURE"),
    ((137, "killed: the task went over its memoryMB (256)", "", False), -1200, "USER_FAILURE"),
    ((137, "", "Memory cgroup out of memory: Killed process 7\n", False), -1200, "USER_FAILURE"),
    ((None, "ErrImagePull: pull access denied", "", False), 254, "USER_FAILURE"),
    ((1, "", "OSError: [Errno 98] Address already in use\n", False), 253, "PLATFORM_FAILURE"),
    ((201, "", "[portal] barrier timed out waiting for PAI_HOST_IP_x\n", False), 252,
     "PLATFORM_FAILURE"),
    ((127, "", "sh: 1: nosuchcmd: not found\n", False), 220, "USER_FAILURE"),
    ((1, "", "RuntimeError: CUDA out of memory. Tried 2 GiB\n", False), 226, "USER_FAILURE"),
    ((1, "", "CUDA_ERROR_ECC_UNCORRECTABLE\n", False), 223, "PLATFORM_FAILURE"),
    ((1, "", TRACEBACK.format("ModuleNotFoundError: No module named x"), False), 232,
     "USER_FAILURE"),
    ((1, "", TRACEBACK.format("SyntaxError: invalid syntax"), False), 231, "USER_FAILURE"),
    ((1, "", TRACEBACK.format("IndexError: list index out of range"), False), 233,
     "USER_FAILURE"),
    ((137, "", "", False), 137, "PLATFORM_FAILURE"),
    ((139, "", "", False), 139, "USER_FAILURE"),
    ((143, "", "", False), 143, "PLATFORM_FAILURE"),
    ((130, "", "", False), 130, "PLATFORM_FAILURE"),
    ((1, "", "", False), 255, "UNKNOWN_FAILURE"),
    ((42, "", "", False), 255, "UNKNOWN_FAILURE"),
    ((137, "", "", True), -210, "USER_STOP"),
    ((None, "the task disappeared without an exit code", "", False), -1001, "PLATFORM_FAILURE"),
]  # fmt: skip


@pytest.mark.parametrize(("observed", "code", "kind"), CASES)
def test_each_failure_gets_openpais_code_and_type(observed, code, kind):
    spec = explain(*observed)
    assert spec is not None
    found = openpai_exit(spec.id, spec.exit_code, spec.lines)
    assert (found.code, found.type) == (code, kind)


def test_a_signal_openpai_has_no_code_for_keeps_its_number_with_the_fallbacks_type():
    spec = explain(128 + 10)  # SIGUSR1
    assert spec is not None
    found = openpai_exit(spec.id, spec.exit_code, spec.lines)
    assert (found.code, found.phrase, found.type) == (
        138,
        "PAIRuntimeExitAbnormally",
        "PLATFORM_FAILURE",
    )


def test_our_phrase_stays_ours():
    spec = explain(137, "OOMKilled")
    assert spec is not None and spec.phrase == "Out of memory"
    assert openpai_exit(spec.id, spec.exit_code).phrase == "UserContainerDockerOOMKilled"
