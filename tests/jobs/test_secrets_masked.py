"""A secret printed by a failing command appears nowhere in clear: not in what reconcile
stores about the task (diagnostics, exit spec, reasons, events), nor in any page, API answer or
admin page built from it, for the owner, another user or an admin."""

from __future__ import annotations

import textwrap

import pytest
from django.test import Client
from rest_framework.test import APIClient

from jobs import lifecycle
from jobs.models import Job, JobAttempt, JobEvent, Task
from jobs.states import JobState
from protocol import SECRET_MASK
from tests.jobs.helpers import settle

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "Zq7xK2mP9wLs"  # letters and digits: the same in HTML, JSON and YAML


def failing_job(name: str, command: str) -> str:
    return textwrap.dedent(f"""\
        protocolVersion: 2
        name: {name}
        type: job
        prerequisites: [{{name: img, type: dockerimage, uri: python}}]
        secrets: {{password: {SECRET}}}
        taskRoles:
          main:
            dockerImage: img
            taskRetryCount: 1
            resourcePerInstance: {{cpu: 1, memoryMB: 128, gpu: 0}}
            commands:
              - {command!r}
        """)


COMMANDS = {
    # The exit spec quotes the matched line: permission-denied-log.
    "quoted": 'echo "opening <% $secrets.password %>: Permission denied" >&2; exit 3',
    # The plugin's name goes into the phrase, hence the diagnostics and the job's reason.
    "named": 'echo "[portal] plugin <% $secrets.password %> failed" >&2; exit 203',
    "callback": 'echo "[portal] callback <% $secrets.password %> failed with exit code 1"'
    " >&2; exit 202",
}


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def web(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def fetched(job: Job, alice, bob, admin) -> dict[str, tuple[int, str]]:
    """Every page and answer that shows the job, as each person sees it: path -> (status,
    text)."""
    slug = f"alice~{job.name}"
    task = Task.objects.filter(attempt__job=job).first()
    attempt = JobAttempt.objects.filter(job=job).first()
    event = JobEvent.objects.filter(job=job).last()
    api_paths = [
        f"/api/v2/jobs/{slug}",
        f"/api/v2/jobs/{slug}/attempts/0",
        f"/api/v2/jobs/{slug}/job-attempts",
        f"/api/v2/jobs/{slug}/job-attempts/0",
        f"/api/v2/jobs/{slug}/events",
        f"/api/v2/jobs/{slug}/config",
        "/api/v2/jobs",
        "/api/v2/jobs?username=alice",
    ]
    web_paths = [f"/jobs/{slug}/", f"/jobs/{slug}/live/", "/jobs/", f"/jobs/{slug}/config.yaml"]
    admin_paths = [
        f"/admin/jobs/job/{job.id}/change/",
        "/admin/jobs/job/",
        f"/admin/jobs/task/{task.id}/change/",
        "/admin/jobs/task/",
        f"/admin/jobs/jobattempt/{attempt.id}/change/",
        f"/admin/jobs/jobevent/{event.id}/change/",
        "/admin/jobs/jobevent/",
    ]
    seen = {}
    for who, user in (("alice", alice), ("bob", bob), ("admin", admin)):
        for path in api_paths:
            response = api(user).get(path)
            seen[f"{who} {path}"] = (response.status_code, response.content.decode())
        client = web(user)
        for path in web_paths + (admin_paths if who == "admin" else []):
            response = client.get(path)
            seen[f"{who} {path}"] = (response.status_code, response.content.decode())
    return seen


@pytest.mark.parametrize("case", sorted(COMMANDS))
def test_a_secret_printed_by_a_failing_command_is_shown_nowhere(case, alice, bob, admin, backend):
    job = settle(backend, lifecycle.submit(alice, failing_job(f"leak-{case}", COMMANDS[case])))
    assert job.state == JobState.FAILED
    tasks = list(Task.objects.filter(attempt__job=job))
    assert tasks[0].retries == 1  # the retry's event quotes the diagnostics too
    # The explanation was made from the log and is stored masked.
    stored = [job.reason, *(t.diagnostics for t in tasks), *(str(t.exit_spec) for t in tasks)]
    stored += [a.reason for a in JobAttempt.objects.filter(job=job)]
    stored += [e.message for e in JobEvent.objects.filter(job=job)]
    assert not [text for text in stored if SECRET in text]
    assert SECRET_MASK in str(tasks[0].exit_spec)
    pages = fetched(job, alice, bob, admin)
    for path, (status, text) in pages.items():
        assert SECRET not in text, f"{path} ({status}) shows the secret"
    must_answer = [p for p in pages if p.startswith(("alice", "admin"))] + [
        "bob /api/v2/jobs",
        "bob /jobs/",
    ]
    assert all(pages[p][0] == 200 for p in must_answer), {p: pages[p][0] for p in must_answer}
    # The job is there to be read: its masked explanation is in the list others see.
    if case != "quoted":
        assert SECRET_MASK in pages["bob /api/v2/jobs"][1]
