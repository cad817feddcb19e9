"""A reason for every exit: each exit-spec case, from a real task to the job page and the API."""

from __future__ import annotations

import pytest
from django.utils.html import escape
from django.utils.text import capfirst

from backends.base import Placement
from jobs import exitspec, lifecycle
from jobs.models import Job, Task
from jobs.states import JobState, TaskState
from tests.jobs.helpers import reconcile_until, settle
from tests.runtime.jobs import api_of, one_role, page_of

pytestmark = pytest.mark.django_db(transaction=True)

CALLBACK = """\
prerequisites:
  - {name: image, type: dockerimage, uri: "python:3.11"}
  - name: fetch
    type: data
    callbacks: [{event: containerStart, commands: ["exit 9"]}]
"""

CASES = {
    "kill_9": (["echo started", "kill -9 $$"], 137, "Killed by signal 9 (SIGKILL)"),
    "traceback": (
        ["echo 'import no_such_module_xyz' > train.py", "python3 train.py"],
        1,
        "Python exception ModuleNotFoundError",
    ),
    "cuda": (
        ["echo 'RuntimeError: CUDA out of memory. Tried 2 GiB' >&2", "exit 1"],
        1,
        "CUDA out of memory",
    ),
    "not_found": (["no_such_command_here"], 127, "Command not found: no_such_command_here"),
    "no_such_file": (
        ["cd /nonexistent && echo never"],
        1,
        "No such file or directory: /nonexistent",
    ),
    "denied": (["touch ./tool", "./tool"], 126, "Permission denied"),
    "no_space": (
        ["echo 'write: No space left on device' >&2", "exit 1"],
        1,
        "No space left on device",
    ),
    "segfault": (["sh -c 'kill -SEGV $$'"], 139, "Segmentation fault"),
    "image": (
        ["echo 'Error response from daemon: pull access denied for nope' >&2", "exit 1"],
        1,
        "Image pull failure",
    ),
}


def check_everywhere(alice, job: Job, code: int | None, phrase: str) -> None:
    task = Task.objects.get(attempt__job=job)
    assert task.exit_code == code
    assert task.exit_spec["phrase"] == phrase
    assert phrase in job.reason
    page = page_of(alice, job)
    assert escape(phrase) in page
    assert escape(capfirst(task.exit_spec["reason"])) in page
    for line in task.exit_spec["lines"]:
        assert escape(line) in page
    body = api_of(alice, job)
    status = body["taskRoles"][task.role]["taskStatuses"][0]
    assert status["containerExitCode"] == code
    assert status["containerExitSpec"]["phrase"] == phrase
    assert phrase in status["containerExitDiagnostics"]
    assert body["jobStatus"]["appExitSpec"]["phrase"] == phrase
    assert body["jobStatus"]["appExitSpec"]["taskRole"] == task.role


@pytest.mark.parametrize("case", CASES)
def test_each_exit_gets_its_phrase_on_the_page_and_in_the_api(alice, backend, case):
    commands, code, phrase = CASES[case]
    job = settle(backend, lifecycle.submit(alice, one_role(f"exit_{case}", commands)))
    assert job.state == JobState.FAILED
    check_everywhere(alice, job, code, phrase)


def test_matched_log_lines_are_kept(alice, backend):
    commands, _, _ = CASES["cuda"]
    job = settle(backend, lifecycle.submit(alice, one_role("lines", commands)))
    spec = Task.objects.get(attempt__job=job).exit_spec
    assert spec["lines"] == ["RuntimeError: CUDA out of memory. Tried 2 GiB"]
    assert spec["type"] == "resource"


def test_a_failed_prerequisite_callback_is_named(alice, backend):
    text = one_role("cb", ["true"]).replace(
        '  - {name: image, type: dockerimage, uri: "python:3.11"}\n', CALLBACK.split("\n", 1)[1]
    )
    text = text.replace(
        "    dockerImage: image\n", "    dockerImage: image\n    prerequisites: [fetch]\n"
    )
    job = settle(backend, lifecycle.submit(alice, text))
    check_everywhere(alice, job, 202, "Prerequisite callback 'fetch' failed")


def test_a_barrier_that_never_passes_says_so(alice, backend, settings, monkeypatch):
    settings.TASK_BARRIER_TIMEOUT_SECONDS = 1
    real_place = backend.place

    def place_without_an_address(key, shapes):
        return [Placement("", p.ports) for p in real_place(key, shapes)]

    monkeypatch.setattr(backend, "place", place_without_an_address)
    job = settle(backend, lifecycle.submit(alice, one_role("barrier", ["true"])))
    check_everywhere(alice, job, 201, "Barrier timeout")
    assert "PAI_HOST_IP_taskrole_1_0" in Task.objects.get(attempt__job=job).exit_spec["lines"][0]


def test_a_stopped_task_is_explained_as_stopped(alice, backend):
    job = lifecycle.submit(alice, one_role("stopped", ["sleep 60"]))
    reconcile_until(
        backend, lambda: Task.objects.filter(attempt__job=job, state=TaskState.RUNNING).exists()
    )
    assert lifecycle.stop(Job.objects.get(id=job.id), alice)
    job = settle(backend, job)
    assert job.state == JobState.STOPPED
    task = Task.objects.get(attempt__job=job)
    assert task.exit_spec["phrase"] == "Stopped"
    assert "Stopped" in page_of(alice, job)
    assert api_of(alice, job)["jobStatus"]["appExitSpec"]["phrase"] == "Stopped"


def test_the_backend_saying_oomkilled_or_image_pull_is_explained():
    assert exitspec.explain(137, "OOMKilled").phrase == "Out of memory"
    pull = exitspec.explain(None, "ErrImagePull: 429 Too Many Requests")
    assert pull is not None and pull.phrase == "Image pull failure"
    assert exitspec.explain(0) is None
    assert exitspec.explain(42).phrase == "Failed with exit code 42"


def test_a_429_in_the_tasks_own_log_is_a_remote_rate_limit_not_an_image_pull():
    log = "Cloning into 'repo'...\nfatal: unable to access: The requested URL returned error: 429\n"
    explained = exitspec.explain(128, "", log)
    assert explained.phrase == "Rate limited by a remote server (HTTP 429)"
    assert explained.lines == ["fatal: unable to access: The requested URL returned error: 429"]
    docker = "toomanyrequests: You have reached your pull rate limit."
    assert exitspec.explain(1, "", docker).phrase == "Image pull failure"


QUOTED = {
    "traceback": "ModuleNotFoundError: No module named 'no_such_module_xyz'",
    "not_found": "user.sh: line 1: no_such_command_here: command not found",
    "no_such_file": "user.sh: line 1: cd: /nonexistent: No such file or directory",
}


@pytest.mark.parametrize("case", QUOTED)
def test_the_reason_quotes_the_log_line_that_matters(alice, backend, case):
    commands, _, phrase = CASES[case]
    job = settle(backend, lifecycle.submit(alice, one_role(f"quote_{case}", commands)))
    task = Task.objects.get(attempt__job=job)
    line = QUOTED[case]
    assert task.exit_spec["quote"] == line
    assert f'"{line}"' in task.exit_spec["reason"]
    assert f'{phrase} — "{line}"' in job.reason
    status = api_of(alice, job)["jobStatus"]["appExitSpec"]
    assert f'"{line}"' in status["reason"]
    assert escape(line) in page_of(alice, job)


def test_kill_9_is_named_as_a_signal_not_out_of_memory(alice, backend):
    commands, _, _ = CASES["kill_9"]
    job = settle(backend, lifecycle.submit(alice, one_role("kill_nine", commands)))
    assert "memory" not in job.reason.lower()
    assert job.reason.endswith("exited with code 137 (Killed by signal 9 (SIGKILL))")
    body = api_of(alice, job)
    assert body["jobStatus"]["appExitSpec"]["phrase"] == "Killed by signal 9 (SIGKILL)"


def test_the_type_is_a_label_before_a_sentence_not_a_word_run_into_it(alice, backend):
    job = settle(backend, lifecycle.submit(alice, one_role("sentence", ["exit 3"])))
    page = page_of(alice, job)
    assert "Caused by the job:</strong>" in page
    assert "The task ended with exit code 3." in page
    assert "user the task" not in page


SECRET = """\
secrets:
  token: s3cr3t-t0ken-value
"""


def test_a_quoted_line_never_shows_a_secret(alice, backend):
    command = "python3 -c \"raise ValueError('bad token <% $secrets.token %>')\""
    job = settle(backend, lifecycle.submit(alice, one_role("secret_quote", [command], SECRET)))
    task = Task.objects.get(attempt__job=job)
    assert task.exit_spec["quote"] == "ValueError: bad token ******"
    stored = f"{task.exit_spec} {task.diagnostics} {job.reason}"
    assert "s3cr3t" not in stored
    assert "ValueError: bad token ******" in job.reason
    assert "s3cr3t" not in page_of(alice, job)
    assert "s3cr3t" not in str(api_of(alice, job))


# -- one case per pattern family, from a log (the end-to-end ones are above) ------------------


@pytest.mark.parametrize(
    ("code", "log", "phrase", "quote"),
    [
        (
            1,
            'Traceback (most recent call last):\n  File "a.py", line 1, in <module>\n'
            "    f()\nKeyError: 'lr'\n\nDuring handling of the above exception, another "
            'exception occurred:\n\nTraceback (most recent call last):\n  File "a.py", '
            "line 3, in <module>\n    raise RuntimeError('no lr')\nRuntimeError: no lr\n",
            "Python exception RuntimeError",
            "RuntimeError: no lr",
        ),
        (
            127,
            "/w/user.sh: 3: nvcc: not found\n",
            "Command not found: nvcc",
            "user.sh: 3: nvcc: not found",
        ),
        (
            2,
            "python3: can't open file '/code/train.py': [Errno 2] No such file or directory\n",
            "No such file or directory: /code/train.py",
            "python3: can't open file '/code/train.py': [Errno 2] No such file or directory",
        ),
        (
            1,
            "Collecting nosuchpkg\nERROR: Could not find a version that satisfies the "
            "requirement nosuchpkg\nERROR: No matching distribution found for nosuchpkg\n",
            "pip install failed",
            "ERROR: No matching distribution found for nosuchpkg",
        ),
        (
            128,
            "Cloning into 'repo'...\nfatal: repository 'https://git.example/x.git/' not found\n",
            "git failed",
            "fatal: repository 'https://git.example/x.git/' not found",
        ),
        (
            8,
            "HTTP request sent, awaiting response... 404 Not Found\n"
            "2026-01-01 10:00:00 ERROR 404: Not Found.\n",
            "Download failed",
            "2026-01-01 10:00:00 ERROR 404: Not Found.",
        ),
        (
            6,
            "curl: (6) Could not resolve host: data.example\n",
            "Download failed",
            "curl: (6) Could not resolve host: data.example",
        ),
        (
            1,
            "RuntimeError: CUDA error: no kernel image is available for execution on the device\n",
            "CUDA error",
            "RuntimeError: CUDA error: no kernel image is available for execution on the device",
        ),
        (
            1,
            "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1207, "
            "unhandled system error\n",
            "NCCL error",
            "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1207, "
            "unhandled system error",
        ),
        (
            137,
            "Memory cgroup out of memory: Killed process 4242 (python)\n",
            "Out of memory",
            "Memory cgroup out of memory: Killed process 4242 (python)",
        ),
    ],
)
def test_each_pattern_family_is_explained_quoting_its_line(code, log, phrase, quote):
    found = exitspec.explain(code, "", log)
    assert (found.phrase, found.quote) == (phrase, quote)
    assert f'"{quote}"' in found.reason


def test_a_signal_is_named_by_its_number_and_name_and_oom_needs_evidence():
    assert exitspec.explain(134).phrase == "Killed by signal 6 (SIGABRT)"
    assert exitspec.explain(137).phrase == "Killed by signal 9 (SIGKILL)"
    assert exitspec.explain(137, "OOMKilled: killed by signal 9 (SIGKILL)").phrase == (
        "Out of memory"
    )
    assert exitspec.explain(300).phrase == "Failed with exit code 300"
