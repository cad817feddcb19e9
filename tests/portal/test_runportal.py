"""``manage.py runportal`` (``make run``): a process of the portal that dies starts again by
itself (supervisord; uvicorn for its workers); SIGTERM stops them all."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis
import requests
import uvicorn
from supervisor.options import ServerOptions
from supervisor.process import Subprocess

from portal import serve
from portal.checks import redis_answers
from portal.management.commands.runportal import Command, supervisord_conf, web_command
from tests.support.servers import free_port
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]


class Output:
    """The lines a process prints, read in a thread; ``wait_for`` blocks until one matches."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        assert process.stdout is not None
        stream = process.stdout
        threading.Thread(
            target=lambda: [self.lines.put(line) for line in stream], daemon=True
        ).start()

    def wait_for(self, pattern: str, timeout: float = 90) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"{pattern!r} not in {self.seen[-40:]}") from None
            self.seen.append(line)
            if match := re.search(pattern, line):
                return match


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"  # not a zombie
    except FileNotFoundError:
        return False


def answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=5).status_code == 200
    except (requests.ConnectionError, requests.Timeout):  # not up, or still loading Django
        return False


def runportal_env(tmp_path: Path, web_processes: int, **extra_env: str) -> dict[str, str]:
    """The environment of an ordinary user's ``make run`` on SQLite under ``tmp_path``, without
    REDIS_URL (it starts a private redis-server of its own) and without the task firewall:
    nothing tasks could use is open, so its checks pass."""
    return {
        **{k: v for k, v in os.environ.items() if k != "REDIS_URL"},
        "PYTHONUNBUFFERED": "1",
        "PORTAL_VAR_DIR": str(tmp_path),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'portal.sqlite3'}",
        "LOCAL_FIREWALL": "off",
        "SECRET_KEY": "runportal-test",
        "PORTAL_ADMIN_PASSWORD": "runportal-test-pw",
        "WEB_PROCESSES": str(web_processes),
        **extra_env,
    }


def start_runportal(
    tmp_path: Path, web_processes: int, **extra_env: str
) -> tuple[subprocess.Popen[str], Output, int]:
    """``manage.py runportal`` as ``runportal_env`` has it, on a free port."""
    port = free_port()
    portal = subprocess.Popen(
        [sys.executable, "manage.py", "runportal", "--port", str(port)],
        cwd=ROOT,
        env=runportal_env(tmp_path, web_processes, **extra_env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return portal, Output(portal), port


def test_a_killed_worker_and_redis_start_again_and_sigterm_stops_all(tmp_path):
    """The web server answers on the one port also once a worker of it is killed (uvicorn starts
    another), a killed Celery worker or Redis is started again by supervisord, and the listener
    of ended tasks is one of the programs too."""
    portal, output, port = start_runportal(tmp_path, web_processes=2)
    try:
        redis_pid = int(output.wait_for(r"spawned: 'redis' with pid (\d+)")[1])
        web_pid = int(output.wait_for(r"spawned: 'web' with pid (\d+)")[1])
        worker_pid = int(output.wait_for(r"spawned: 'worker' with pid (\d+)")[1])
        watcher_pid = int(output.wait_for(r"spawned: 'watcher' with pid (\d+)")[1])
        server_pid = int(output.wait_for(r"Started server process \[(\d+)\]")[1])
        output.wait_for(r"celery@\S+ ready")
        login = f"http://127.0.0.1:{port}/login/"
        wait_for(lambda: answers(login))
        os.kill(server_pid, signal.SIGKILL)
        output.wait_for(rf"Child process \[{server_pid}\] died")
        wait_for(lambda: answers(login))
        assert alive(web_pid)  # uvicorn's parent, which started the worker again

        os.kill(worker_pid, signal.SIGKILL)  # as the OOM killer would
        output.wait_for(r"exited: worker \(terminated by SIGKILL; not expected\)")
        new_worker = int(output.wait_for(r"spawned: 'worker' with pid (\d+)")[1])
        assert new_worker != worker_pid and alive(new_worker)
        output.wait_for(r"celery@\S+ ready")  # the new worker is connected to the broker

        os.kill(redis_pid, signal.SIGKILL)
        output.wait_for(r"exited: redis \(terminated by SIGKILL; not expected\)")
        new_redis = int(output.wait_for(r"spawned: 'redis' with pid (\d+)")[1])
        assert alive(new_redis) and alive(new_worker)  # nothing else went down with it

        portal.send_signal(signal.SIGTERM)
        assert portal.wait(60) == 0
        assert not any(alive(pid) for pid in (new_worker, new_redis, watcher_pid, web_pid))
    finally:
        if portal.poll() is None:
            portal.kill()
            portal.wait()


def test_the_portal_is_up_only_once_its_port_accepts_connections(tmp_path):
    """The line that sends people to the portal comes once uvicorn listens, not before."""
    portal, output, port = start_runportal(tmp_path, web_processes=1)
    try:
        output.wait_for(r"The portal is up")
        socket.create_connection(("127.0.0.1", port), timeout=5).close()  # at once, no retry
    finally:
        portal.send_signal(signal.SIGTERM)
        portal.wait(60)


def test_its_output_to_a_file_keeps_every_program_s_lines(tmp_path):
    """``make run > log``: supervisord's programs each open its standard output again; each
    writes at the file's end, not over the others' lines."""
    log = tmp_path / "portal.log"
    with log.open("w") as out:  # not in append mode, as a shell's > opens it
        portal = subprocess.Popen(
            [sys.executable, "manage.py", "runportal", "--port", str(free_port())],
            cwd=ROOT,
            env=runportal_env(tmp_path, 1),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(lambda: re.search(r"celery@\S+ ready", log.read_text()), timeout=90)
        wait_for(lambda: "Uvicorn running on" in log.read_text())
    finally:
        portal.send_signal(signal.SIGTERM)
        portal.wait(60)
    text = log.read_text()
    for line in ("The portal is up", "spawned: 'watcher'", "[tasks]", "Started server process"):
        assert line in text, text
    assert text.rstrip().endswith("stopped.")


def test_supervisord_runs_each_command_as_runportal_wrote_it(tmp_path):
    """supervisord splits a command as a shell would and expands %(...)s in it: an empty
    argument (Redis's --save ""), a space, a quote or a % in a path reach the program as given."""
    command = ["/bin/echo", "100%", "", "two words", "it's", "%(ENV_HOME)s"]
    options = ServerOptions()
    options.realize(args=["-c", str(supervisord_conf({"echo": command}, tmp_path))])
    [program] = options.process_group_configs[0].process_configs
    assert Subprocess(program).get_execv_args() == ("/bin/echo", command)


def test_the_private_redis_answers_only_with_its_password(settings, tmp_path, monkeypatch):
    """A job on this machine reaches the loopback: the Redis runportal starts wants the password
    kept in var/ (0600), which is on no command line."""
    port = free_port()
    settings.VAR_DIR = tmp_path
    settings.REDIS_URL = f"redis://127.0.0.1:{port}/0"  # nothing answers: a private one starts
    monkeypatch.setenv("REDIS_URL", settings.REDIS_URL)  # ensure_redis sets the new one
    command = Command().ensure_redis()
    assert command is not None
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL)  # as supervisord runs it
    try:
        wait_for(lambda: redis_answers(os.environ["REDIS_URL"]))
        url = os.environ["REDIS_URL"]
        password = (tmp_path / "redis_password").read_text().strip()
        assert url.startswith(f"redis://:{password}@127.0.0.1:")
        with pytest.raises(redis.exceptions.RedisError, match="(?i)auth"):
            redis.Redis.from_url(url.replace(f":{password}@", "")).ping()
        assert redis.Redis.from_url(url).ping()
        for name in ("redis_password", "redis.conf"):
            assert (tmp_path / name).stat().st_mode & 0o777 == 0o600, name
        assert password.encode() not in Path(f"/proc/{server.pid}/cmdline").read_bytes()
    finally:
        server.kill()
        server.wait()


def test_a_killed_runportal_leaves_no_process_behind(tmp_path):
    """runportal killed outright (SIGKILL, the OOM killer) cannot stop its children itself:
    they are told by the kernel, and the port, the private Redis and the database are let go."""
    portal, output, port = start_runportal(tmp_path, web_processes=2)
    try:
        names = ("redis", "web", "worker", "beat", "watcher")
        pids = {
            name: int(output.wait_for(rf"spawned: '{name}' with pid (\d+)")[1]) for name in names
        }
        for n in (1, 2):  # uvicorn's workers
            pids[f"web-{n}"] = int(output.wait_for(r"Started server process \[(\d+)\]")[1])
        output.wait_for(r"celery@\S+ ready")
        login = f"http://127.0.0.1:{port}/login/"
        wait_for(lambda: answers(login))
    finally:
        portal.kill()
        portal.wait()
    try:
        wait_for(lambda: not any(alive(pid) for pid in pids.values()), timeout=60)
        assert not answers(login)
    finally:  # what a failure left behind
        for pid in pids.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)


def test_without_redis_url_a_private_redis_starts_even_beside_an_open_one(
    settings, tmp_path, monkeypatch, redis_server
):
    """A Redis answering at the default URL is not taken: without a password, every job on
    this machine could share it."""
    settings.VAR_DIR = tmp_path
    settings.REDIS_URL = redis_server.url  # what settings.py makes of an unset REDIS_URL, here
    monkeypatch.delenv("REDIS_URL", raising=False)
    assert Command().ensure_redis() is not None
    password = (tmp_path / "redis_password").read_text().strip()
    assert os.environ["REDIS_URL"].startswith(f"redis://:{password}@127.0.0.1:")
    assert f":{redis_server.port}/" not in os.environ["REDIS_URL"]
    assert os.environ["REDIS_URL"] == settings.REDIS_URL  # what runportal's checks see


def test_a_redis_url_set_and_answering_is_used(monkeypatch, redis_server):
    monkeypatch.setenv("REDIS_URL", redis_server.url)
    assert Command().ensure_redis() is None


def test_a_redis_url_read_from_a_file_is_used_as_compose_passes_it(
    settings, monkeypatch, redis_server
):
    """docker-compose.yml gives REDIS_URL_FILE (settings.py reads it into REDIS_URL): no private
    Redis starts beside the stack's (the image has no redis-server: it would not start at all)."""
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("REDIS_URL_FILE", "/run/secrets/redis_url")
    settings.REDIS_URL = redis_server.url
    assert Command().ensure_redis() is None


def test_runportal_refuses_to_start_beside_a_redis_tasks_could_use(tmp_path, redis_server):
    env = {
        **os.environ,
        "PORTAL_VAR_DIR": str(tmp_path),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'portal.sqlite3'}",
        "REDIS_URL": redis_server.url,
        "LOCAL_FIREWALL": "off",  # as on a host without nft, or an ordinary user's
    }
    run = subprocess.run(
        [sys.executable, "manage.py", "runportal", "--port", str(free_port())],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "(portal.E006) local tasks could use the portal's Redis" in run.stderr
    assert "LOCAL_ALLOW_OPEN_SERVICES=true" in run.stderr
    assert not (tmp_path / "portal.sqlite3").exists()  # before anything ran

    allowed = {**env, "LOCAL_ALLOW_OPEN_SERVICES": "true"}
    check = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=allowed, capture_output=True
    )
    assert check.returncode == 0, check.stderr


def test_the_api_latency_in_metrics_adds_up_every_web_process(tmp_path):
    """Two uvicorn workers answer on one socket; a scrape, answered by either, counts the
    requests both answered (prometheus_client's multiprocess mode, in files under var/metrics)."""
    portal, output, port = start_runportal(tmp_path, web_processes=2, USAGE_SAMPLE_SECONDS="1")
    try:
        output.wait_for(r"The portal is up")
        base = f"http://127.0.0.1:{port}"
        wait_for(lambda: answers(f"{base}/api/v2/authn/info"))
        before = api_count(base, "api/v2/authn/info")
        for _ in range(30):  # a connection each: the kernel hands them to either process
            assert requests.get(f"{base}/api/v2/authn/info", timeout=10).status_code == 200
        assert api_count(base, "api/v2/authn/info") == before + 30
        # Beat sends sample_usage every second; the worker runs it without a line about it.
        output.wait_for(r"celery@\S+ ready")
        time.sleep(4)
        while not output.lines.empty():
            output.seen.append(output.lines.get())
        banner = "  . jobs.tasks.sample_usage\n"  # the worker's list of its tasks
        assert not [line for line in output.seen if "sample_usage" in line and line != banner]
        assert len(list((tmp_path / "metrics").glob("histogram_*.db"))) == 2
    finally:
        portal.send_signal(signal.SIGTERM)
        portal.wait(60)


def api_count(base: str, route: str) -> float:
    """GET /metrics' count of the API's GET requests to ``route``."""
    wanted = f'portal_api_request_duration_seconds_count{{method="GET",route="{route}"}}'
    counts = [
        float(line.split()[-1])
        for line in requests.get(f"{base}/metrics", timeout=10).text.splitlines()
        if line.startswith(wanted + " ")
    ]
    assert len(counts) == 1, counts
    return counts[0]


def test_the_images_command_serves_as_runportal_does():
    """deploy/kubernetes/web.yaml runs the image's command: the same server and flags."""
    text = (ROOT / "Dockerfile").read_text()
    command = json.loads(re.search(r"^CMD (\[.*?\])$", text, re.S | re.M)[1].replace("\\\n", ""))
    ours = web_command("0.0.0.0", 8000, 1)  # noqa: S104 - the image listens on every address
    assert command == ["python", *ours[1:8], *ours[10:]]


def test_the_web_processes_accept_connections_with_nagle_off():
    """``uvicorn --workers N`` binds the socket its workers accept on; without TCP_NODELAY on
    it (uvicorn issue #3149), each request on a kept-alive connection after the first waited
    ~40 ms for the client's delayed ACK. ``portal.serve`` sets it, and Linux copies it to each
    accepted socket."""
    assert web_command("127.0.0.1", 8000, 2)[1:3] == ["-m", "portal.serve"]
    config = uvicorn.Config("portal.asgi:application", host="127.0.0.1", port=0)
    with serve.bind_socket(config) as listener:  # what uvicorn --workers binds
        listener.listen()
        with socket.create_connection(listener.getsockname()):
            accepted, _ = listener.accept()
            with accepted:
                assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
