"""The README's compose section, run for real: docker-compose.yml on this machine's Docker engine,
then what a first user does (the README's first job, its log, a task's port from the host, a
terminal in the browser, stop), what a hostile task tries, and a service restarted.

Skipped only where no Docker engine can run (``tests/support/compose.py`` says what is missing;
``make docker`` installs it), never in CI. About 4 minutes here, 2 of them building the portal's
image; a second run reuses Docker's build cache."""

from __future__ import annotations

import base64
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import yaml

from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.browser.pages import log_in
from tests.clusters.helpers import job_text
from tests.readme import README, first_job
from tests.support import compose

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "portaltest"
TASK_PORTS = range(21000, 21020)  # published by the stack: few, so that it starts fast


def readme_commands() -> list[str]:
    """The command lines of the README's compose section, exactly as shown."""
    block = README.read_text().split("<!-- compose -->", 1)[1].split("<!-- /compose -->", 1)[0]
    lines = block.strip().removeprefix("```sh\n").removesuffix("```").splitlines()
    return [line.split("#", 1)[0].strip() for line in lines if line.split("#", 1)[0].strip()]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def stack() -> Iterator[compose.Stack]:
    if missing := compose.missing_tools():
        if os.environ.get("CI") == "true":
            pytest.fail(f"docker compose cannot run in CI: missing {', '.join(missing)}")
        pytest.skip(f"docker compose cannot run here: missing {', '.join(missing)}")
    compose.ensure_dockerd()
    images = compose.build_images()
    port = free_port()
    env = {
        **os.environ,
        **images,
        "COMPOSE_PROJECT_NAME": PROJECT,
        "PORTAL_PORT": str(port),
        "PORTAL_TASK_PORTS": f"{TASK_PORTS.start}-{TASK_PORTS.stop - 1}",
    }
    running = compose.Stack(PROJECT, env, url=f"http://127.0.0.1:{port}", task_ports=TASK_PORTS)
    running.down()  # what a killed run left behind
    try:
        up, logs = readme_commands()
        running.shell(up)
        running.wait_until_up()
        running.admin_password = running.read_admin_password()
        assert "password" in running.shell(logs)
        yield running
    finally:
        print(running.logs()[-20000:])  # shown by pytest when a test failed
        running.down()


def api(stack: compose.Stack, username: str, password: str) -> requests.Session:
    session = requests.Session()
    login = {"username": username, "password": password}
    answer = session.post(f"{stack.url}/api/v2/authn/basic/login", json=login, timeout=30)
    assert answer.status_code == 200, answer.text
    session.headers["Authorization"] = f"Bearer {answer.json()['token']}"
    return session


@pytest.fixture(scope="module")
def admin(stack: compose.Stack) -> requests.Session:
    return api(stack, "admin", stack.admin_password)


@pytest.fixture(scope="module")
def alice(stack: compose.Stack, admin: requests.Session) -> requests.Session:
    """An ordinary user: her tasks get no admin's leniency."""
    new = {"username": "alice", "password": "alice-secret-pw", "admin": False}
    answer = admin.post(f"{stack.url}/api/v2/users", json=new, timeout=30)
    assert answer.status_code == 201, answer.text
    return api(stack, "alice", "alice-secret-pw")


def submit(stack: compose.Stack, session: requests.Session, text: str) -> None:
    answer = session.post(
        f"{stack.url}/api/v2/jobs", data=text.encode(), headers={"Content-Type": "text/yaml"}
    )
    assert answer.status_code in (200, 201, 202), answer.text


def wait_for(
    stack: compose.Stack, session: requests.Session, job: str, states: set[str], seconds=120
) -> dict:
    deadline = time.monotonic() + seconds
    while True:
        detail = session.get(f"{stack.url}/api/v2/jobs/{job}", timeout=30).json()
        if detail["jobStatus"]["state"] in states:
            return detail
        assert time.monotonic() < deadline, f"{job} is still {detail['jobStatus']['state']}"
        time.sleep(0.5)


def task_of(detail: dict, role: str = "main") -> dict:
    return detail["taskRoles"][role]["taskStatuses"][0]


def test_the_readmes_first_job_succeeds_and_its_log_downloads(stack, admin):
    submit(stack, admin, first_job())
    detail = wait_for(stack, admin, "admin~hello_distributed", {"SUCCEEDED", "FAILED"})
    assert detail["jobStatus"]["state"] == "SUCCEEDED", detail
    server = task_of(detail, "ps_server")
    assert int(server["containerPorts"]["http"]) in stack.task_ports  # published to this host
    log = admin.get(server["containerLog"].replace("http://127.0.0.1:8000", stack.url))
    assert log.status_code == 200
    assert "hello from the parameter server" in log.text


def test_a_tasks_port_answers_from_the_host_and_the_terminal_reaches_the_task(stack, alice):
    serve = "cd $(mktemp -d) && echo served-from-a-task > index.html && "
    serve += "exec python3 -m http.server $PAI_CONTAINER_HOST_http_PORT_LIST"
    submit(stack, alice, job_text("served", command=serve, memory_mb=256, ports={"http": 1}))
    detail = wait_for(stack, alice, "alice~served", {"RUNNING", "FAILED", "SUCCEEDED"})
    task = task_of(detail)
    address = f"http://{task['containerIp']}:{task['containerPorts']['http']}/"
    deadline = time.monotonic() + 60
    while True:  # the server inside may take a moment to listen
        try:
            assert "served-from-a-task" in requests.get(address, timeout=5).text
            break
        except requests.RequestException:
            assert time.monotonic() < deadline, f"nothing answers at {address}"
            time.sleep(0.5)

    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.set_default_timeout(60_000)
        log_in(page, stack.url, "alice", "alice-secret-pw")
        page.goto(f"{stack.url}/jobs/alice~served/")
        page.locator("#live .summary .state", has_text="RUNNING").wait_for()
        page.locator("#task-main-0 .terminal-link").click()
        page.locator("#terminal-status", has_text="connected").wait_for()
        page.locator("#terminal").click()
        page.keyboard.type("echo role=$PAI_CURRENT_TASK_ROLE_NAME uid=$(id -u)\n")
        page.wait_for_function(
            """() => { const b = window.portalTerminal.buffer.active; let text = "";
            for (let i = 0; i < b.length; i++) text += b.getLine(i).translateToString(true);
            return /role=main uid=\\d+/.test(text); }"""
        )
        browser.close()

    stop = alice.put(
        f"{stack.url}/api/v2/jobs/alice~served/executionType", json={"value": "STOP"}, timeout=30
    )
    assert stop.status_code == 202, stop.text
    assert wait_for(stack, alice, "alice~served", {"STOPPED"})["jobStatus"]["state"] == "STOPPED"


PROBE = """\
import json, socket
seen = {}
for host, port in [("postgres", 5432), ("redis", 6379), ("127.0.0.1", 6379), ("127.0.0.1", 8000)]:
    address = socket.getaddrinfo(host, port, socket.AF_INET)[0][4]  # DNS must answer
    with socket.socket() as sock:
        sock.settimeout(10)
        try:
            sock.connect(address)
            seen[f"{host}:{port}"] = "open"
        except OSError as exc:
            seen[f"{host}:{port}"] = type(exc).__name__
for path in ["/var/lib/portal/secrets/redis_url", "/var/lib/portal/secret_key", "/app/manage.py"]:
    try:
        open(path).read()
        seen[path] = "read"
    except OSError as exc:
        seen[path] = type(exc).__name__
seen["uid"] = __import__("os").getuid()
print("PROBE " + json.dumps(seen), flush=True)
held = [b"x" * (10 << 20) for _ in range(60)]  # 600 MB, written: past its memoryMB of 256
print("NOT STOPPED at", len(held) * 10, "MB")
"""


def test_a_hostile_task_reaches_neither_the_database_nor_redis_nor_the_portals_secrets(
    stack, alice
):
    encoded = base64.b64encode(PROBE.encode()).decode()
    submit(
        stack,
        alice,
        job_text("hostile", command=f"echo {encoded} | base64 -d | python3", memory_mb=256),
    )
    detail = wait_for(stack, alice, "alice~hostile", {"SUCCEEDED", "FAILED"})
    assert detail["jobStatus"]["state"] == "FAILED", detail
    assert "went over its memoryMB (256 MB)" in json.dumps(detail), detail  # the cgroup's kill
    log = alice.get(task_of(detail)["containerLog"].replace("http://127.0.0.1:8000", stack.url))
    line = next((ln for ln in log.text.splitlines() if ln.startswith("PROBE ")), None)
    assert line, log.text
    seen = json.loads(line.removeprefix("PROBE "))
    # Resolved by Docker's DNS, then refused at once by the task firewall's closed networks.
    assert seen["postgres:5432"] == "ConnectionRefusedError", seen
    assert seen["redis:6379"] == "ConnectionRefusedError", seen
    assert seen["127.0.0.1:6379"] == "ConnectionRefusedError", seen
    assert seen["127.0.0.1:8000"] == "open", seen  # the portal's public port
    for path in ("/var/lib/portal/secrets/redis_url", "/var/lib/portal/secret_key"):
        assert seen[path] in ("FileNotFoundError", "PermissionError"), seen
    assert seen["/app/manage.py"] in ("FileNotFoundError", "PermissionError"), seen
    assert seen["uid"] >= 200_000, seen  # a task uid, not the container's root


def test_every_limit_holds_in_the_portal_container(stack):
    limits = [line for line in stack.logs().splitlines() if "limits:" in line]
    assert any("cgroup v" in line and "memory, cpu, pids limited" in line for line in limits), (
        limits
    )
    assert any("disk:" in line and "MB per task" in line for line in limits), limits
    assert any("nftables table" in line for line in limits), limits
    assert not [line for line in limits if "NOT" in line or "not limited" in line], limits


def test_redis_and_the_portal_restarted_come_back_and_jobs_run_again(stack, admin):
    stack.compose("restart", "redis")
    submit(stack, admin, job_text("after-redis", command="echo after a Redis restart"))
    detail = wait_for(stack, admin, "admin~after-redis", {"SUCCEEDED", "FAILED"}, seconds=180)
    assert detail["jobStatus"]["state"] == "SUCCEEDED", detail
    stack.compose("restart", "portal")
    stack.wait_until_up()
    again = api(stack, "admin", stack.admin_password)  # the same database, the same admin
    submit(stack, again, job_text("after-portal", command="echo after a portal restart"))
    detail = wait_for(stack, again, "admin~after-portal", {"SUCCEEDED", "FAILED"}, seconds=180)
    assert detail["jobStatus"]["state"] == "SUCCEEDED", detail
    names = [job["name"] for job in again.get(f"{stack.url}/api/v2/jobs", timeout=30).json()]
    assert "hello_distributed" in names


def test_the_passwords_are_made_at_first_start_and_written_in_no_file(stack):
    text = (ROOT / "docker-compose.yml").read_text()
    services = yaml.safe_load(text)["services"]
    assert "PASSWORD:" not in text.replace("PASSWORD_FILE:", "")
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD_FILE"] == "/secrets/db_password"
    url = stack.compose("exec", "-T", "portal", "cat", "/var/lib/portal/secrets/redis_url")
    password = url.strip().removeprefix("redis://:").split("@")[0]
    assert len(password) >= 32
    assert password not in stack.logs()


LIMITS = """\
import pathlib, tempfile
import django; django.setup()
from backends.local import disk
from clusters.registry import get_backend
print("\\n".join(get_backend().describe_limits()))
control = pathlib.Path(tempfile.mkdtemp())
(control / "work").mkdir()
disk.mount_limited(control, control / "work", 16, (1234, 1234), control)  # a task's file system
disk.release(control, control / "work")
"""
# The sandbox as a task gets it (sandbox.py: setpriv to the task's uid, then bwrap in namespaces
# of its own, its /proc, pivot_root), then the terminal's way in (nsenter into its namespaces).
SANDBOX = (
    "setpriv --reuid=1234 --regid=1234 --clear-groups --inh-caps=-all --bounding-set=-all "
    "--no-new-privs bwrap --unshare-all --share-net --die-with-parent --ro-bind / / --proc /proc "
    "--dev /dev sleep 30 & "
    # its process inside the namespaces (not bwrap itself, before it made them): up to 30 s
    "for _ in $(seq 300); do for s in $(grep -l '^Uid:[[:space:]]*1234' /proc/[0-9]*/status); do "
    'p=${s%/status}; [ "$(readlink $p/ns/user)" != "$(readlink /proc/self/ns/user)" ] '
    '&& task=${p#/proc/}; done; [ -n "${task:-}" ] && break; sleep 0.1; done; '
    "nsenter --target=$task --user --mount --pid --setuid=1234 --setgid=1234 true"
)


def run_portal_image(options: list[str]) -> str:
    """What the portal's container, started with ``options``, says of its tasks' limits and
    whether the sandbox starts in it (the compose entrypoint first, as in the stack)."""
    script = f'python -c "$LIMITS" && {SANDBOX} && echo SANDBOX-OK'
    argv = [compose.BUILDER, "run", "--rm", "-e", "DJANGO_SETTINGS_MODULE=portal.settings"]
    argv += ["-e", f"LIMITS={LIMITS}"]
    argv += ["-e", "LOCAL_FIREWALL=auto", *options]
    argv += ["--entrypoint", "deploy/compose/sandbox-host", "gpu-portal", "sh", "-c", script]
    done = compose.subprocess.run(argv, capture_output=True, text=True, timeout=120)
    return f"exit {done.returncode}\n{done.stdout}{done.stderr}"


def test_each_privilege_the_compose_file_gives_the_portal_is_needed(stack):
    """The portal service's capabilities, security options and devices, from the file: with
    all of them every limit holds and the sandbox starts; without any one, something fails."""
    service = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["portal"]
    granted = [("--cap-add", cap) for cap in service["cap_add"]]
    granted += [("--security-opt", opt) for opt in service["security_opt"]]
    granted += [("--device", device) for device in service["devices"]]
    granted += [("--device-cgroup-rule", rule) for rule in service["device_cgroup_rules"]]

    def held(output: str) -> bool:
        return (
            output.startswith("exit 0")
            and "SANDBOX-OK" in output
            and "NOT" not in output
            and "not limited" not in output
            and "reach every port" not in output
        )

    everything = run_portal_image([arg for pair in granted for arg in pair])
    assert held(everything), everything
    for left_out in granted:
        if left_out[1].startswith("apparmor"):
            continue  # this machine has no AppArmor: the profile changes nothing here
        rest = [arg for pair in granted if pair != left_out for arg in pair]
        output = run_portal_image(rest)
        assert not held(output), f"{left_out} is granted but not needed:\n{output}"
