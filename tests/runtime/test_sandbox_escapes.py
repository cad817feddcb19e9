"""A job is hostile code: as alice, it tries every way out of its sandbox into the portal or into
bob's work, and each attempt fails (its log shows each one blocked, nothing escaped); over its
memoryMB it is killed and reported as out of memory; after Stop nothing it started is left.

Its network (as root: the task firewall, backends/local/firewall.py): it tries what the
portal itself uses on this machine, as CI and ``make run`` have them: the machine's Redis
without a password (PING, and writing the reconcile lock), its PostgreSQL and MariaDB, the
private Redis of ``make run``, an internal port of the portal's on the loopback and on the
host's own address; each is refused. Bob's job port is reached, as on OpenPAI.

The task root is where production keeps it (in ``var/``, not under ``/tmp``, which every sandbox
has of its own anyway), so that hiding the portal's tree is what is tested."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis

from backends.local import LocalBackend
from clusters import registry
from jobs import lifecycle
from jobs.models import Job, Task
from jobs.states import JobState, TaskState
from portal.apps import stored_secret_key
from portal.checks import redis_answers
from portal.management.commands.runportal import Command
from tests.jobs.helpers import reconcile_until, settle
from tests.runtime.jobs import one_role
from tests.support.images import IMAGE, image_storage
from tests.support.processes import processes_running
from tests.support.servers import connects
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["image_storage"]  # the busybox image, a fixture

SSH_PLUGIN = """\
extras:
  com.microsoft.pai.runtimeplugin:
    - plugin: ssh
      parameters: {jobssh: true}
"""

# Each attempt prints "blocked <what>" when it fails and "ESCAPED <what>" when it works.
CHECK = (
    'check() { what=$1; shift; if "$@" >/dev/null 2>&1; then echo "ESCAPED $what"; '
    'else echo "blocked $what"; fi; }'
)
# A Redis command over a bare TCP connection (bash's /dev/tcp): succeeds on +PONG only.
REDIS_PING = (
    'redis_ping() { exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1; printf "PING\\r\\n" >&3; '
    'read -r line <&3; exec 3>&-; case "$line" in +PONG*) return 0 ;; esac; return 1; }'
)
# The same with busybox's nc, in an image without bash.
REDIS_PING_NC = 'redis_ping() { printf "PING\\r\\n" | nc -w 2 127.0.0.1 "$1" | grep -q "^+PONG"; }'
# Taking the reconcile lock in database $2 (for 30 s: a pass skips while it is held), and a bare
# TCP connection to host $1, port $2; bash's, then busybox's.
REDIS_LOCK = (
    'redis_lock() { exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1; '
    'printf "SELECT $2\\r\\nSET portal:reconcile x EX 30\\r\\n" >&3; '
    "read -r -t 5 a <&3; read -r -t 5 b <&3; exec 3>&-; "
    'case "$a$b" in "+OK"*"+OK"*) return 0 ;; esac; return 1; }'
)
REDIS_LOCK_NC = (
    'redis_lock() { printf "SELECT $2\\r\\nSET portal:reconcile x EX 30\\r\\n" '
    '| nc -w 2 127.0.0.1 "$1" | grep -c "^+OK" | grep -qx 2; }'
)
TCP_OPEN = 'tcp_open() { timeout 5 bash -c \'exec 3<>"/dev/tcp/$0/$1"\' "$1" "$2"; }'
TCP_OPEN_NC = 'tcp_open() { nc -w 3 "$1" "$2" </dev/null; }'
# Bob's task listens on its job port (``http``), as TensorBoard or Jupyter would.
LISTEN = (
    "python3 -c \"import socket, sys; s = socket.create_server(('127.0.0.1', int(sys.argv[1]))); "
    '[c.close() for c, _ in iter(s.accept, None)]" $PAI_CONTAINER_HOST_http_PORT_LIST &'
)
LISTEN_NC = "while :; do nc -l -p $PAI_CONTAINER_HOST_http_PORT_LIST </dev/null; done &"
# Where the task firewall holds (as root; CI is): else tasks reach the loopback, and the system
# check refuses a Redis or database they could use (tests/portal/test_checks.py).
FENCED = os.geteuid() == 0 or bool(os.environ.get("CI"))


@pytest.fixture(params=["host", "image"])
def in_image(request: pytest.FixtureRequest, settings) -> bool:
    """The escapes are tried on the host's system and, with LOCAL_IMAGES=charliecloud, in the
    job's image (a busybox one: ch-run inside the bwrap sandbox)."""
    if request.param == "image":
        settings.LOCAL_IMAGES = "charliecloud"
        settings.LOCAL_IMAGE_STORAGE = request.getfixturevalue("image_storage")
        registry.get_backend.cache_clear()
        return True
    return False


def in_the_image(text: str, image: bool) -> str:
    """A job file from ``one_role`` whose dockerImage is the busybox image when ``image``."""
    return text.replace('uri: "python:3.11"', f'uri: "{IMAGE}"') if image else text


@pytest.fixture
def portal_var(settings) -> Iterator[Path]:
    """A var/ of the portal's own, in its tree (its secret key, its task root)."""
    var = Path(settings.BASE_DIR) / "var" / f"escape-test-{uuid.uuid4().hex[:8]}"
    var.mkdir(parents=True, mode=0o700)
    stored_secret_key(var / "secret_key")
    settings.VAR_DIR = var
    settings.LOCAL_TASK_ROOT = var / "tasks"
    registry.get_backend.cache_clear()
    yield var
    shutil.rmtree(var, ignore_errors=True)


@pytest.fixture
def private_redis(settings, portal_var: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """The Redis ``make run`` starts (REDIS_URL unset), with its password; its port."""
    tests_redis = settings.REDIS_URL
    settings.REDIS_URL = tests_redis  # set here: what ensure_redis sets is undone after the test
    monkeypatch.delenv("REDIS_URL", raising=False)
    command = Command().ensure_redis()
    assert command is not None
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL)  # as supervisord runs it
    url = os.environ["REDIS_URL"]
    port = urlsplit(url).port
    assert port is not None
    settings.REDIS_URL = tests_redis  # the portal under test keeps the tests' own Redis
    try:
        wait_for(lambda: redis_answers(url))
        yield port
    finally:
        server.kill()
        server.wait()


@pytest.fixture
def internal_port() -> Iterator[int]:
    """A port of the portal's own that wants no password (as the machine's PostgreSQL that
    trusts local connections), on every address of this host; it answers each connection."""
    server = socket.create_server(("::", 0), family=socket.AF_INET6, dualstack_ipv6=True)

    def serve() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:  # closed: the test is over
                return
            connection.close()

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


def host_address() -> str | None:
    """An IPv4 address of this host's own besides the loopback, if it has one."""
    shown = subprocess.run(
        ["ip", "-o", "-4", "addr", "show", "scope", "global"],  # noqa: S607
        capture_output=True,
        text=True,
    ).stdout.split()
    return shown[shown.index("inet") + 1].split("/")[0] if "inet" in shown else None


def network_attempts(
    in_image: bool, private_redis: int, internal_port: int, bobs_port: int, tests_redis: str
) -> tuple[list[str], list[str]]:
    """The lines that try the portal's services from the task and the names each blocked one
    prints (in order), as root: what the task firewall refuses. The machine's Redis is the
    one the tests use (settings.REDIS_URL: 6379 here and in CI, without a password), in the
    tests' own database."""
    redis_url = urlsplit(tests_redis)
    redis_port, redis_db = redis_url.port or 6379, redis_url.path.strip("/") or "0"
    lines = [
        REDIS_LOCK_NC if in_image else REDIS_LOCK,
        TCP_OPEN_NC if in_image else TCP_OPEN,
        f"check machine_redis redis_ping {redis_port}",
        f"check reconcile_lock redis_lock {redis_port} {redis_db}",
        "check postgresql tcp_open 127.0.0.1 5432",
        "check mariadb tcp_open 127.0.0.1 3306",
        f"check private_redis_port tcp_open 127.0.0.1 {private_redis}",
        f"check internal_port tcp_open 127.0.0.1 {internal_port}",
        f"check internal_port_ipv6 tcp_open ::1 {internal_port}",
    ]
    names = [line.split()[1] for line in lines[2:]]
    if (address := host_address()) is not None:
        lines.append(f"check internal_port_host_address tcp_open {address} {internal_port}")
        names.append("internal_port_host_address")
    lines.append(
        f"if tcp_open 127.0.0.1 {bobs_port}; then echo 'reached other_job_port'; "
        "else echo 'unreached other_job_port'; fi"
    )
    return lines, names


@pytest.fixture
def portal_process() -> Iterator[subprocess.Popen[bytes]]:
    """A process of the portal's user that no task may signal."""
    process = subprocess.Popen(["sleep", "600"])  # noqa: S607
    yield process
    process.kill()
    process.wait()


def running_task(backend: LocalBackend, job: Job) -> Task:
    reconcile_until(
        backend, lambda: Task.objects.filter(attempt__job=job, state=TaskState.RUNNING).exists()
    )
    return Task.objects.get(attempt__job=job)


def test_a_hostile_job_reaches_nothing_of_the_portal_nor_of_another_user(
    alice,
    bob,
    portal_var,
    private_redis,
    in_image,
    backend,
    portal_process,
    internal_port,
    monkeypatch,
    settings,
):
    monkeypatch.setenv("SECRET_KEY", "portal-secret-in-its-environment")
    marker = Path(settings.VAR_DIR) / "readable-by-anyone.txt"
    marker.write_text("the portal's\n")
    marker.chmod(0o644)  # only the sandbox keeps a task from it
    base = Path(settings.BASE_DIR)
    assert (base / "manage.py").stat().st_mode & 0o004  # world-readable on the host

    bobs_text = one_role("bobs", [LISTEN_NC if in_image else LISTEN, "sleep 120"], SSH_PLUGIN)
    bobs_text = bobs_text.replace("ports: {ssh: 1}", "ports: {ssh: 1, http: 1}")
    bobs_job = lifecycle.submit(bob, in_the_image(bobs_text, in_image))
    bobs_task = running_task(backend, bobs_job)
    bobs_control = backend.root / bobs_task.backend_ref
    bobs_work = backend.work_dir(bobs_task.backend_ref)
    wait_for(lambda: (bobs_work / ".ssh" / "id_job").exists())
    bobs_record = json.loads((bobs_control / "task.json").read_text())
    bobs_pid, bobs_port = int(bobs_record["pid"]), int(bobs_record["ports"]["http"][0])
    wait_for(lambda: connects(bobs_port))
    network, fenced_off = [], []
    if FENCED:
        assert backend.firewall.active  # as root: nft is installed (make install) and works
        network, fenced_off = network_attempts(
            in_image, private_redis, internal_port, bobs_port, settings.REDIS_URL
        )
        with redis.Redis.from_url(settings.REDIS_URL) as tests_redis:
            tests_redis.delete("portal:reconcile")  # no pass holds it: tests run passes bare

    written = base / f"escaped-{uuid.uuid4().hex[:6]}"
    attempts = [
        CHECK,
        REDIS_PING_NC if in_image else REDIS_PING,
        f"check secret_key cat {settings.VAR_DIR}/secret_key",
        f"check var_file cat {marker}",
        f"check redis_password cat {settings.VAR_DIR}/redis_password",
        f"check portal_tree cat {base}/manage.py",
        f"check settings cat {base}/portal/settings.py",
        # Judged on the host (below): with the portal under /tmp, as in a CI clone, the path
        # may exist in the task's own private /tmp, where writing harms nothing.
        f"touch {written} 2>/dev/null; echo tried write_tree",
        f"check other_log cat {bobs_control}/stdout.log",
        f"check other_script cat {bobs_control}/bootstrap.sh",
        f"check other_dir ls {bobs_work}",
        f"check other_ssh_key cat {bobs_work}/.ssh/id_job",
        f"check portal_environ cat /proc/{os.getpid()}/environ",
        f"check portal_signal kill -TERM {portal_process.pid}",
        f"check other_signal kill -TERM {bobs_pid}",
        f"check redis_without_password redis_ping {private_redis}",
        "if env | grep -qE '^(SECRET_KEY|DATABASE_URL|REDIS_URL)='; "
        "then echo 'ESCAPED environment'; else echo 'blocked environment'; fi",
        *network,
        "echo processes: $(ls /proc | grep -c '^[0-9]')",
        "[ -e /etc/os-release ] && echo os-release: host || echo os-release: busybox",
    ]
    job = settle(
        backend, lifecycle.submit(alice, in_the_image(one_role("escape", attempts), in_image))
    )

    task = Task.objects.get(attempt__job=job)
    log = backend.read_log(task.backend_ref, "stdout").decode()
    assert job.state == JobState.SUCCEEDED, backend.read_log(task.backend_ref, "stderr")
    assert "ESCAPED" not in log, log
    blocked = [line.split()[1] for line in log.splitlines() if line.startswith("blocked ")]
    assert blocked == [
        "secret_key",
        "var_file",
        "redis_password",
        "portal_tree",
        "settings",
        "other_log",
        "other_script",
        "other_dir",
        "other_ssh_key",
        "portal_environ",
        "portal_signal",
        "other_signal",
        "redis_without_password",
        "environment",
        *fenced_off,
    ], log
    if FENCED:
        assert "reached other_job_port" in log, log  # another user's job port, as on OpenPAI
        with redis.Redis.from_url(settings.REDIS_URL) as tests_redis:
            assert tests_redis.get("portal:reconcile") != b"x"
    if in_image:  # the image's busybox, not the host's Debian
        assert "os-release: busybox" in log, log
    # Its own processes only: bwrap's init, the bootstrap, the user's script and ls.
    assert int(log.split("processes: ")[1].split()[0]) <= 6, log
    assert portal_process.poll() is None
    assert not written.exists()
    assert Task.objects.get(id=bobs_task.id).state == TaskState.RUNNING
    lifecycle.stop(Job.objects.get(id=bobs_job.id), bob)
    settle(backend, bobs_job)


@pytest.mark.skipif(os.geteuid() != 0, reason="memory cgroups need root (else a best effort)")
def test_a_task_over_its_memory_is_killed_and_reported_out_of_memory(alice, backend):
    allocate = "python3 -c \"s = b'x' * (256 * 1024 * 1024); print('allocated', len(s))\""
    text = one_role("hog", [allocate]).replace("memoryMB: 128", "memoryMB: 64")
    job = settle(backend, lifecycle.submit(alice, text))
    task = Task.objects.get(attempt__job=job)
    assert job.state == JobState.FAILED
    assert "allocated" not in backend.read_log(task.backend_ref, "stdout").decode()
    assert task.exit_code == 137
    assert "OOMKilled: the task went over its memoryMB (64 MB)" in task.diagnostics
    assert task.exit_spec["phrase"] == "Out of memory"
    assert "Out of memory" in job.reason


def test_stop_leaves_nothing_behind_whatever_the_job_started(alice, backend, shared):
    started = shared / "started"
    commands = [
        "setsid sleep 3331 &",
        "nohup sleep 3332 >/dev/null 2>&1 &",
        "(sleep 3333 &) &",  # a double fork: adopted by the sandbox's init
        "sh -c 'trap \"\" TERM HUP; exec sleep 3334' &",  # deaf to SIGTERM
        f"touch {started}",
        "sleep 3335",
    ]
    job = lifecycle.submit(alice, one_role("leaver", commands))
    running_task(backend, job)
    sleeps = [["sleep", str(n)] for n in range(3331, 3336)]
    wait_for(lambda: started.exists() and all(processes_running(argv) for argv in sleeps))

    assert lifecycle.stop(Job.objects.get(id=job.id), alice)
    job = settle(backend, job)

    assert job.state == JobState.STOPPED
    wait_for(lambda: not any(processes_running(argv) for argv in sleeps))
