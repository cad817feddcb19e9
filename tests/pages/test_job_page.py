"""The job page: port links, SSH panel, followed logs; home."""

from __future__ import annotations

import html
import re

import pytest
from django.test import Client

from jobs import lifecycle
from jobs.models import Job, JobAttempt, Task
from jobs.sshinfo import SshdState, ssh_user
from jobs.views.tasks import port_links, ssh_panel
from tests.jobs.helpers import reconcile_until, settle
from tests.jobs.samples import hello_job
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db


def test_web_port_labels_become_links():
    task = Task(ip="10.0.0.5", ports={"jupyter": [8888], "ssh": [2222], "tensorboard": [6006]})
    assert port_links(task) == [
        ("jupyter", 8888, "http://10.0.0.5:8888/"),
        ("ssh", 2222, ""),
        ("tensorboard", 6006, "http://10.0.0.5:6006/"),
    ]


def test_the_ssh_panel_has_a_command_per_running_task_and_a_config():
    job = Job(name="train", ssh_public_key="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB x")
    running = Task(id=1, role="w", index=0, state="RUNNING", ip="10.0.0.5", ports={"ssh": [2222]})
    done = Task(id=2, role="w", index=1, state="SUCCEEDED", ip="10.0.0.6", ports={"ssh": [2223]})
    panel = ssh_panel(job, [running, done], {1: SshdState("listening")})
    assert panel is not None
    assert [t["sshCommand"] for t in panel["tasks"]] == [
        f"ssh -i train.id_ed25519 -p 2222 {ssh_user()}@10.0.0.5"
    ]
    assert "Host train-w-0\n  HostName 10.0.0.5\n  Port 2222" in panel["config"]


def test_a_running_job_shows_its_ssh_panel_and_key_link(web, alice, backend):
    text = hello_job(command="sleep 20").replace("ports: {http: 1}", "ports: {http: 1, ssh: 1}")
    text += (
        "extras:\n  com.microsoft.pai.runtimeplugin: [{plugin: ssh, parameters: {jobssh: true}}]\n"
    )
    job = lifecycle.submit(alice, text)
    reconcile_until(backend, lambda: Task.objects.filter(state="RUNNING").exists())
    # The command shows once the task's sshd listens (/usr/sbin/sshd on this machine).
    body = wait_for(
        lambda: (
            (page := web.get("/jobs/alice~hello/").content.decode())
            and "ssh -i hello.id_ed25519 -p " in page
            and page
        )
    )
    assert "/jobs/alice~hello/ssh-key/" in body
    assert 'class="port-link"' in body
    lifecycle.stop(job, alice)
    settle(backend, job)


def test_the_log_page_follows_a_task_and_stops_when_it_ends(web, alice, backend):
    settle(backend, lifecycle.submit(alice, hello_job(command="echo followed")))
    page = web.get("/jobs/alice~hello/logs/0/main-0/stdout/view/").content.decode()
    assert "followed" in page and "has ended" in page and "hx-trigger" not in page
    tail = web.get("/jobs/alice~hello/logs/0/main-0/stdout/tail/").content.decode()
    assert "followed" in tail and "<html" not in tail


def test_a_live_task_log_asks_again(web, alice, backend):
    job = lifecycle.submit(alice, hello_job(command="sleep 20"))
    reconcile_until(backend, lambda: Task.objects.filter(state="RUNNING").exists())
    page = web.get("/jobs/alice~hello/logs/0/main-0/stdout/view/").content.decode()
    assert 'hx-trigger="every 2s"' in page
    lifecycle.stop(job, alice)
    settle(backend, job)


BIG_LOG = (
    "seq 0 19999 | sed 's/.*/line & xxxxxxxxxxxxxxxxxxxx/'; "
    "echo the needle is here; echo NEEDLE again"
)


def test_a_large_log_shows_its_tail_first_and_older_parts_on_demand(web, alice, backend):
    settle(backend, lifecycle.submit(alice, hello_job(command=BIG_LOG)))
    view = "/jobs/alice~hello/logs/0/main-0/stdout/view/"
    page = html.unescape(web.get(view).content.decode())
    assert "NEEDLE again" in page and "line 100 " not in page  # the last 32 KB only
    older = re.search(r'href="\?tail=(\d+)" id="load-older"', page)
    assert older and int(older.group(1)) == 4 * 32 * 1024
    more = html.unescape(web.get(f"{view}?tail={older.group(1)}").content.decode())
    assert "line 17000 " in more and "line 100 " not in more
    whole = html.unescape(web.get(f"{view}?tail={16 * 1024 * 1024}").content.decode())
    assert "line 0 " in whole and 'id="load-older"' not in whole  # all of it is shown


def test_a_search_finds_lines_of_the_whole_log_with_their_numbers_secrets_masked(
    web, alice, backend
):
    command = BIG_LOG + "; echo '<% $secrets.token %>'"
    text = hello_job(command=command, secrets="{token: s3cr3t-search}")
    settle(backend, lifecycle.submit(alice, text))
    search = "/jobs/alice~hello/logs/0/main-0/stdout/search/"
    page = html.unescape(web.get(search, {"q": "needle"}).content.decode())
    assert "2 lines with “needle”" in page
    assert '<span class="line-number">20001</span> the needle is here' in page
    assert '<span class="line-number">20002</span> NEEDLE again' in page
    first = html.unescape(web.get(search, {"q": "line 7 "}).content.decode())
    assert '<span class="line-number">8</span> line 7 xxxx' in first  # beyond the tail too
    masked = html.unescape(web.get(search, {"q": "s3cr3t"}).content.decode())
    assert "0 lines with" in masked and "s3cr3t-search" not in masked.split("Search the")[0]
    refused = web.get(search, {"q": ""})
    assert refused.status_code == 400 and "q: 1 to 200 characters" in refused.content.decode()


def test_another_user_gets_404_for_log_views(alice, bob, backend):
    settle(backend, lifecycle.submit(alice, hello_job()))
    client = Client()
    client.force_login(bob)
    assert client.get("/jobs/alice~hello/logs/0/main-0/stdout/view/").status_code == 404
    assert client.get("/jobs/alice~hello/logs/0/main-0/stdout/tail/").status_code == 404
    assert client.get("/jobs/alice~hello/logs/0/main-0/stdout/search/?q=x").status_code == 404
    assert client.get("/jobs/alice~hello/ssh-key/").status_code == 404


def test_the_detail_page_offers_clone_and_export(web, alice):
    lifecycle.submit(alice, hello_job())
    body = web.get("/jobs/alice~hello/").content.decode()
    assert "/jobs/alice~hello/clone/" in body and "/jobs/alice~hello/config.yaml" in body


def test_home_shows_my_jobs_by_state_recent_jobs_and_my_vcs(web, alice, bob):
    lifecycle.submit(alice, hello_job(name="first"))
    lifecycle.stop(lifecycle.submit(alice, hello_job(name="second")), alice)
    lifecycle.submit(bob, hello_job(name="bobs"))
    body = web.get("/").content.decode()
    assert 'data-state="WAITING">1<' in body and 'data-state="STOPPED">1<' in body
    assert "first" in body and "second" in body and "bobs" not in body
    assert 'id="vc-default"' in body


def test_the_page_tails_the_logs_of_a_few_tasks_failed_first(monkeypatch):
    from jobs.views import detail

    reads: list[tuple[str, str]] = []

    class Backend:
        def read_log(self, ref: str, stream: str, tail: int) -> bytes:
            reads.append((ref, stream))
            return b"last line\n"

    monkeypatch.setattr(detail, "get_backend", Backend)
    tasks = [Task(role="w", index=i, state="RUNNING", backend_ref=f"a/w-{i}") for i in range(12)]
    tasks[10].state = "FAILED"
    tasks.append(Task(role="w", index=12, state="WAITING"))  # not started: no log
    tailed = detail.tail_logs(tasks, Job(protocol={}))
    assert [t.index for t in tailed] == [10, 0, 1, 2, 3, 4, 5, 6]
    assert len(reads) == 2 * detail.LOG_TAIL_TASKS
    assert tailed[0].log_tail == {"stdout": "last line\n", "stderr": "last line\n"}


def attempts_of(job: Job, states: list[str]) -> list[JobAttempt]:
    """Attempts 0.. of ``job`` as a job retry leaves them, each with its one task."""
    made = []
    for number, state in enumerate(states):
        key = f"a{job.id}-{number}"
        attempt = JobAttempt.objects.create(job=job, number=number, key=key, state=state)
        Task.objects.create(
            attempt=attempt, role="main", index=0, state=state, node=f"node-{number}"
        )
        made.append(attempt)
    return made


def live_url(page: str) -> str:
    return page.split('id="live" data-url="', 1)[1].split('"', 1)[0]


def test_the_live_part_follows_the_newest_attempt_after_a_retry(web, alice):
    job = lifecycle.submit(alice, hello_job())
    attempts_of(job, ["FAILED"])
    url = live_url(web.get("/jobs/alice~hello/").content.decode())
    assert url == "/jobs/alice~hello/live/"
    JobAttempt.objects.create(job=job, number=1, key=f"a{job.id}-1")  # the job is retried
    Task.objects.create(attempt=job.attempts.get(number=1), role="main", index=0, node="node-1")
    live = web.get(url).content.decode()
    assert 'aria-current="true">1 (running)' in live and "node-1" in live and "node-0" not in live


def test_an_attempt_chosen_in_the_selector_stays_shown(web, alice):
    job = lifecycle.submit(alice, hello_job())
    attempts_of(job, ["FAILED", "FAILED", "RUNNING"])
    page = web.get("/jobs/alice~hello/").content.decode()
    assert page.count('class="attempt"') == 3
    assert 'href="?attempt=0"' in page and 'aria-current="true">2 (running)' in page
    chosen = web.get("/jobs/alice~hello/?attempt=0").content.decode()
    assert live_url(chosen) == "/jobs/alice~hello/live/?attempt=0"
    assert (
        'aria-current="true">0 (failed)' in chosen and "node-0" in chosen and "node-2" not in chosen
    )
    assert 'id="follow-latest"' in chosen and 'href="?attempt=2" id="follow-latest"' in chosen
    live = web.get(live_url(chosen)).content.decode()
    assert "node-0" in live and "node-2" not in live


def test_choosing_the_latest_attempt_follows_later_ones(web, alice):
    job = lifecycle.submit(alice, hello_job())
    attempts_of(job, ["FAILED", "RUNNING"])
    page = web.get("/jobs/alice~hello/?attempt=1").content.decode()
    assert live_url(page) == "/jobs/alice~hello/live/" and 'id="follow-latest"' not in page
