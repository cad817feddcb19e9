"""The network of local tasks (``backends/local/firewall.py``): a task's uid reaches its
jobs' ports, the portal's public port, DNS and other hosts, and nothing else of this host; the
portal's own uid (root) is never affected.

First in a network namespace of the test's own (``unshare -n``: its nftables are gone with it),
with listeners on allowed and forbidden ports on the loopback, on an address of its own (a veth
end: "the host's address") and on another namespace ("another host"), and clients run as a task
uid and as root. Then on this machine, with a table of the test's own name (removed after): a
real sandboxed task is refused by this machine's Redis, PostgreSQL and MariaDB and reaches
another task's port."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from backends.base import Placement, TaskLaunch, TaskPhase
from backends.local import LocalBackend
from backends.local.firewall import (
    DNS_PORT,
    FirewallConfig,
    FirewallError,
    TaskFirewall,
    additions,
    local_networks,
    removal,
    run_nft,
    unavailable_reason,
)
from backends.local.sandbox import SandboxConfig
from tests.support.local_tasks import phase_of, wait_until_ended
from tests.support.servers import connects
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
as_root = pytest.mark.skipif(
    os.geteuid() != 0 and not os.environ.get("CI"),  # CI runs as root: never skipped there
    reason="the firewall is set as root (tasks run as uids of their own only then)",
)
TASK_UID = 200_003  # LOCAL_TASK_UID_BASE + portal user 3
TASK_PORT, PUBLIC_PORT, FORBIDDEN_PORT, TASK_SERVES_PORT = 7001, 8000, 6379, 7555
# Run as the task's uid: connects to ``sys.argv[2]`` of the loopback ``sys.argv[1]`` times and
# prints how many connections opened.
CONNECTS = """\
import socket, sys
opened = 0
for _ in range(int(sys.argv[1])):
    with socket.socket() as sock:
        try:
            sock.connect(("127.0.0.1", int(sys.argv[2])))
            opened += 1
        except OSError:
            pass
print(opened)
"""

# Run as a task's uid and as root inside the namespace: tries each target and prints what
# happened ("open": connected and greeted or echoed; "refused"; "denied": the send failed at
# once; "timeout"). Python's own, no file of ours
# (the test's files are not the task uid's to read).
CLIENT = """\
import json, socket, sys
results = {}
for proto, host, port in json.loads(sys.argv[1]):
    kind = socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, kind) as sock:
        sock.settimeout(3)
        try:
            sock.connect((host, port))
            if proto == "udp":
                sock.send(b"hi")
            results[f"{proto} {host} {port}"] = "open" if sock.recv(16) else "closed"
        except ConnectionRefusedError:
            results[f"{proto} {host} {port}"] = "refused"
        except PermissionError:  # the kernel refused to send it (UDP)
            results[f"{proto} {host} {port}"] = "denied"
        except (TimeoutError, socket.timeout):
            results[f"{proto} {host} {port}"] = "timeout"
        except OSError as exc:
            results[f"{proto} {host} {port}"] = f"error {exc}"
print(json.dumps(results))
"""
# A listener that greets every connection (TCP) or echoes (UDP), run in another namespace or
# as the task's uid.
GREETER = """\
import socket, sys
host, port = sys.argv[1], int(sys.argv[2])
family = socket.AF_INET6 if ":" in host else socket.AF_INET
server = socket.socket(family, socket.SOCK_STREAM)
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind((host, port))
server.listen()
print("listening", flush=True)
while True:
    conn, _ = server.accept()
    conn.sendall(b"hi")
    conn.close()
"""
HERE = "10.77.0.1", "fd77::1"  # this namespace's own addresses: "the host's"
ELSEWHERE = "10.77.0.2"  # the other namespace's: "another host"


def as_uid(uid: int | None, argv: list[str]) -> list[str]:
    ids = [f"--reuid={uid}", f"--regid={uid}", "--clear-groups"] if uid is not None else []
    return ["setpriv", *ids, *argv] if ids else argv


def serve(host: str, port: int, udp: bool = False) -> socket.socket:
    """A greeting TCP listener (or a UDP echo) on ``host:port`` (``::``: IPv4 and IPv6), in a
    thread of this process (root's) that ends when its socket is closed."""
    kind = socket.SOCK_DGRAM if udp else socket.SOCK_STREAM
    server = socket.socket(socket.AF_INET6, kind)
    server.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((host, port))

    def loop() -> None:
        while True:
            try:
                if udp:
                    data, peer = server.recvfrom(64)
                    server.sendto(data, peer)
                    continue
                conn, _ = server.accept()
            except OSError:  # closed
                return
            with conn:
                conn.sendall(b"hi")

    if not udp:
        server.listen()
    threading.Thread(target=loop, daemon=True).start()
    return server


def time_waits(port: int) -> int:
    listed = subprocess.run(  # noqa: S603
        ["ss", "-Htn", "state", "time-wait", f"( dport = :{port} )"],  # noqa: S607
        capture_output=True,
        text=True,
    )
    return len(listed.stdout.splitlines())


def started(argv: list[str]) -> subprocess.Popen[str]:
    """A greeter started and listening."""
    process = subprocess.Popen(  # noqa: S603
        argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "listening"
    return process


def tries(uid: int | None, targets: list[tuple[str, str, int]]) -> dict[str, str]:
    argv = as_uid(uid, ["/usr/bin/python3", "-c", CLIENT, json.dumps(targets)])
    done = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60)  # noqa: S603
    results: dict[str, str] = json.loads(done.stdout)
    return results


def in_namespace() -> None:
    """Run as root in a fresh network namespace: sets it up, tries every target as the task's
    uid and as root without the table, with it, and with it removed again; prints JSON."""

    def sh(*argv: str) -> None:
        subprocess.run(argv, check=True)  # noqa: S603

    sh("ip", "link", "set", "lo", "up")
    other = subprocess.Popen(["unshare", "-n", "sleep", "120"])  # noqa: S607 - another host
    processes = [other]
    try:
        print(json.dumps(tried_in_namespace(other.pid, processes, sh)))
    finally:
        for process in processes:
            process.kill()


def tried_in_namespace(
    other: int, processes: list[subprocess.Popen[str]], sh: Callable[..., None]
) -> dict[str, object]:
    """``in_namespace``'s steps; ``other`` is the pid in the namespace of "another host", and
    ``processes`` gets what is started here, to be killed."""
    own = os.readlink("/proc/self/ns/net")
    wait_for(lambda: os.readlink(f"/proc/{other}/ns/net") != own)
    sh("ip", "link", "add", "host0", "type", "veth", "peer", "name", "peer0")
    sh("ip", "link", "set", "peer0", "netns", str(other))
    sh("ip", "addr", "add", f"{HERE[0]}/24", "dev", "host0")
    sh("ip", "addr", "add", f"{HERE[1]}/64", "dev", "host0", "nodad")
    sh("ip", "link", "set", "host0", "up")
    there = ["nsenter", "-t", str(other), "-n"]
    sh(*there, "ip", "addr", "add", f"{ELSEWHERE}/24", "dev", "peer0")
    sh(*there, "ip", "link", "set", "peer0", "up")
    processes.append(started([*there, "/usr/bin/python3", "-c", GREETER, ELSEWHERE, "6379"]))
    for port in (TASK_PORT, PUBLIC_PORT, FORBIDDEN_PORT, 53):
        serve("::", port)
    for port in (53, FORBIDDEN_PORT):
        serve("::", port, udp=True)
    # The task serves on a port nobody gave it: the replies to root's client still go out.
    task_server = ["/usr/bin/python3", "-c", GREETER, "127.0.0.1", str(TASK_SERVES_PORT)]
    processes.append(started(as_uid(TASK_UID, task_server)))

    targets = [
        ("tcp", host, port)
        for host in ("127.0.0.1", "::1", *HERE)
        for port in (TASK_PORT, PUBLIC_PORT, 53, FORBIDDEN_PORT)
    ]
    targets += [("udp", "127.0.0.1", 53), ("udp", "::1", FORBIDDEN_PORT)]
    targets += [("tcp", ELSEWHERE, 6379)]
    firewall = TaskFirewall(FirewallConfig(table="portal_test", open_ports=(PUBLIC_PORT,)))
    seen: dict[str, object] = {"before": tries(TASK_UID, targets)}
    firewall.sync([TASK_PORT, 7002], tasks_running=True)
    seen["made"] = chains_and_ports("portal_test")
    firewall.sync([TASK_PORT], tasks_running=True)  # again, as each launch does: the same table
    seen["synced"] = chains_and_ports("portal_test")
    seen["task"] = tries(TASK_UID, targets)
    seen["root"] = tries(None, [*targets, ("tcp", "127.0.0.1", TASK_SERVES_PORT)])
    seen["table"] = tables()
    firewall.sync([], tasks_running=False)
    seen["after"] = tries(TASK_UID, targets)
    seen["table_after"] = tables()
    seen["closed"] = tried_with_closed_networks(sh)
    return seen


def chains_and_ports(table: str) -> dict[str, object]:
    """The handles of the table and its chains (one made again gets a new one), its ports."""
    listed = subprocess.run(  # noqa: S603
        ["nft", "-j", "list", "table", "inet", table],  # noqa: S607
        capture_output=True,
        text=True,
        check=True,
    )
    found: dict[str, object] = {}
    for entry in json.loads(listed.stdout)["nftables"]:
        if "table" in entry:
            found["table"] = entry["table"]["handle"]
        if "chain" in entry:
            found[entry["chain"]["name"]] = entry["chain"]["handle"]
        if "set" in entry:
            found["ports"] = sorted(entry["set"].get("elem", []))
    return found


def tried_with_closed_networks(sh: Callable[..., None]) -> dict[str, str]:
    """The table with this host's own networks closed (compose's LOCAL_TASK_CLOSED_NETWORKS=
    local), and a DNS redirected by a NAT rule as Docker's embedded DNS is (127.0.0.11:53 to
    a port of its own, here FORBIDDEN_PORT)."""
    config = FirewallConfig(
        table="portal_test", open_ports=(PUBLIC_PORT,), closed_networks=("local",)
    )
    firewall = TaskFirewall(config)
    nat = "portal_test_nat"
    sh(
        "nft",
        f"add table ip {nat}; add chain ip {nat} out {{ type nat hook output priority -100; }}",
    )
    sh(
        "nft",
        f"add rule ip {nat} out ip daddr 127.0.0.11 tcp dport 53"
        f" dnat to 127.0.0.1:{FORBIDDEN_PORT}",
    )
    firewall.sync([TASK_PORT], tasks_running=True)
    try:
        targets = [("tcp", ELSEWHERE, 6379), ("tcp", HERE[0], TASK_PORT)]
        targets += [("tcp", HERE[0], FORBIDDEN_PORT), ("tcp", "127.0.0.11", 53)]
        return tries(TASK_UID, targets)
    finally:
        firewall.sync([], tasks_running=False)
        sh("nft", f"delete table ip {nat}")


@pytest.fixture(scope="module")
def namespace_results() -> dict[str, dict[str, str]]:
    code = "from tests.backends.test_firewall import in_namespace; in_namespace()"
    done = subprocess.run(  # noqa: S603
        ["unshare", "-n", sys.executable, "-c", code],  # noqa: S607
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    results: dict[str, dict[str, str]] = json.loads(done.stdout.splitlines()[-1])
    return results


@as_root
def test_in_a_namespace_a_task_uid_is_refused_by_every_port_of_the_host_but_the_allowed(
    namespace_results,
):
    task = namespace_results["task"]
    for host in ("127.0.0.1", "::1", *HERE):  # the loopback and the host's own addresses
        assert task[f"tcp {host} {FORBIDDEN_PORT}"] == "refused", host  # at once, not a hang
        assert task[f"tcp {host} {TASK_PORT}"] == "open", host  # a port the backend gave
        assert task[f"tcp {host} {PUBLIC_PORT}"] == "open", host  # the portal's public port
        assert task[f"tcp {host} 53"] == "open", host  # DNS
    assert task["udp 127.0.0.1 53"] == "open"
    assert task[f"udp ::1 {FORBIDDEN_PORT}"] == "denied"
    assert task[f"tcp {ELSEWHERE} 6379"] == "open"  # another host: any port


@as_root
def test_in_a_namespace_root_is_never_affected_and_a_task_still_answers_on_any_port(
    namespace_results,
):
    assert set(namespace_results["root"].values()) == {"open"}, namespace_results["root"]
    assert namespace_results["root"][f"tcp 127.0.0.1 {TASK_SERVES_PORT}"] == "open"


@as_root
def test_in_a_namespace_everything_is_open_without_the_table_which_goes_when_told(
    namespace_results,
):
    """The refusals above are the table's: before it, and once removed, all is open."""
    for moment in ("before", "after"):
        assert set(namespace_results[moment].values()) == {"open"}, namespace_results[moment]
    assert "table inet portal_test" in namespace_results["table"]
    assert namespace_results["table_after"] == ""


@as_root
def test_in_a_namespace_the_table_is_brought_up_to_date_in_place_not_made_again(
    namespace_results,
):
    """Its chains stay (their hooks stay registered), only the rules and ports change: a
    chain made again let every packet through while its rules were not yet in force."""
    made, synced = namespace_results["made"], namespace_results["synced"]
    assert made["ports"] == [TASK_PORT, 7002] and synced["ports"] == [TASK_PORT]
    assert [made[k] for k in ("table", "output", "task_uids")] == [
        synced[k] for k in ("table", "output", "task_uids")
    ]


@as_root
def test_in_a_namespace_closed_networks_are_refused_and_a_redirected_dns_still_answers(
    namespace_results,
):
    closed = namespace_results["closed"]
    assert closed[f"tcp {ELSEWHERE} 6379"] == "refused"  # another host of this host's network
    assert closed[f"tcp {HERE[0]} {TASK_PORT}"] == "open"  # this host's own address: as lo
    assert closed[f"tcp {HERE[0]} {FORBIDDEN_PORT}"] == "refused"
    assert closed["tcp 127.0.0.11 53"] == "open"  # the port asked for, before the NAT rule


def test_local_networks_are_the_routes_without_a_gateway_but_loopback_and_the_default(tmp_path):
    (tmp_path / "route").write_text(
        "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n"
        "eth0\t00000000\t010012AC\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
        "eth0\t000012AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n"
        "eth1\t0000000A\t0100000A\t0003\t0\t0\t0\t000000FF\t0\t0\t0\n"
    )
    zero = "0" * 32
    (tmp_path / "ipv6_route").write_text(
        f"fd000000000000000000000000000000 40 {zero} 00 {zero} 00000100 1 0 00000001 eth0\n"
        f"fd000000000000000000000000000007 80 {zero} 00 {zero} 00000000 1 0 01000001 eth0\n"
        f"{zero} 00 {zero} 00 fd000000000000000000000000000001 00000400 1 0 00000003 eth0\n"
        f"{zero[:-1]}1 80 {zero} 00 {zero} 00000000 1 0 80200001 lo\n"
        f"ff000000000000000000000000000000 08 {zero} 00 {zero} 00000100 1 0 00000001 eth0\n"
    )
    assert [str(n) for n in local_networks(tmp_path)] == ["172.18.0.0/16", "fd00::/64"]


def test_closed_networks_are_checked_when_configured():
    with pytest.raises(ValueError, match="10.0.0.0/33"):
        FirewallConfig(closed_networks=("10.0.0.0/33",))


# -- on this machine ------------------------------------------------------------------------

# The host tests' tasks run as uids of a range of their own, past the default range, so that
# the test's table touches no other task of this machine (another test run's) for the seconds
# it is there, nor another table theirs.
HOST_UID_BASE = 1_300_000 + int(os.environ.get("TEST_SLOT", "0")) * 100_000


@pytest.fixture
def host_table() -> Iterator[FirewallConfig]:
    config = FirewallConfig(
        table=f"portal_test_{uuid.uuid4().hex[:8]}",
        uid_base=HOST_UID_BASE,
        uid_span=1000,
        open_ports=(free_port(),),
    )
    yield config
    run_nft(config, removal(config))  # whatever the test left


def free_port() -> int:
    with closing(socket.socket()) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def launch(backend: LocalBackend, key: str, script: str, ports: list[int]) -> str:
    return backend.launch(
        TaskLaunch(
            attempt_key=key,
            role="worker",
            index=0,
            retry=0,
            script=script,
            env={},
            placement=Placement(ip="127.0.0.1", ports={"http": ports} if ports else {}),
            cpu=1,
            memory_mb=256,
            gpu=0,
            owner_id=3,
        )
    )


def reach(port: int, host: str = "127.0.0.1") -> str:
    """A line of the task's script: ``<port> <host> open|refused|timeout`` for a TCP connect."""
    return (
        f"timeout 5 bash -c 'exec 3<>/dev/tcp/{host}/{port}' 2>/dev/null; "
        f'case $? in 0) r=open ;; 124) r=timeout ;; *) r=refused ;; esac; echo "{port} {host} $r"'
    )


def outcome(backend: LocalBackend, ref: str) -> dict[str, str]:
    assert wait_until_ended(backend, ref, timeout=60) == TaskPhase.SUCCEEDED
    lines = backend.read_log(ref, "stdout").decode().splitlines()
    return {" ".join(line.split()[:2]): line.split()[2] for line in lines}


def tables() -> str:
    return subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout  # noqa: S607


@as_root
@pytest.mark.parametrize("mode", ["auto", "off"])
def test_a_sandboxed_task_reaches_no_service_of_this_machine_but_another_tasks_port(
    tmp_path: Path, host_table: FirewallConfig, mode: str
):
    """With the firewall (the default as root), refused: this machine's Redis, PostgreSQL and
    MariaDB, and a service of the test's own on the loopback; open: another task's port and
    the portal's public port. With LOCAL_FIREWALL=off the service of the test's own is open:
    the refusals are the rules'."""
    config = FirewallConfig(**{**host_table.__dict__, "mode": mode})
    backend = LocalBackend(
        tmp_path / "tasks", sandbox_config=SandboxConfig(uid_base=HOST_UID_BASE), firewall=config
    )
    internal, public, peers = free_port(), config.open_ports[0], free_port()
    listeners = [serve("::", internal), serve("::", public)]
    server = f"exec python3 -c {shlex.quote(GREETER)} 127.0.0.1 {peers}"
    peer = launch(backend, "job-1-a1", server, [peers])
    wait_for(lambda: phase_of(backend, peer) == TaskPhase.RUNNING)
    wait_for(lambda: connects(peers), timeout=20)
    targets = [6379, 5432, 3306, internal, public, peers]
    prober = launch(backend, "job-2-a1", "\n".join(reach(port) for port in targets), [])
    seen = outcome(backend, prober)
    ipv6 = launch(backend, "job-3-a1", reach(internal, "::1"), [])
    seen |= outcome(backend, ipv6)
    if mode == "off":
        assert seen[f"{internal} 127.0.0.1"] == "open", seen
        assert host_table.table not in tables()
    else:
        assert host_table.table in tables()  # while tasks run
        assert seen == {
            "6379 127.0.0.1": "refused",  # this machine's Redis (no password here)
            "5432 127.0.0.1": "refused",  # its PostgreSQL (trusts the loopback here)
            "3306 127.0.0.1": "refused",  # its MariaDB
            f"{internal} 127.0.0.1": "refused",
            f"{internal} ::1": "refused",
            f"{public} 127.0.0.1": "open",
            f"{peers} 127.0.0.1": "open",  # another job's task port, as on OpenPAI
        }
    backend.stop([peer])
    wait_until_ended(backend, peer)
    backend.cleanup([])  # nothing runs any more: the table goes
    assert host_table.table not in tables()
    for listener in listeners:
        listener.close()


@as_root
def test_a_task_gets_no_connection_on_the_ports_of_one_in_time_wait(
    host_table: FirewallConfig, settings
):
    """On the loopback the kernel gives a new connection the ports of one in TIME-WAIT for over
    a second (tcp_tw_reuse), and conntrack counted a task's connection to the tests' Redis on
    such ports established: after 2,000 of root's PINGs, 9 to 24 of a task's 400 tries
    connected while the table let "established" packets through. Only the replies on
    connections opened to a task pass now."""
    redis_port = urlsplit(settings.REDIS_URL).port or 6379
    TaskFirewall(host_table).sync([], tasks_running=True)
    for _ in range(2000):
        with socket.create_connection(("127.0.0.1", redis_port)) as sock:
            sock.sendall(b"PING\r\n")
            sock.recv(16)  # then this end closes first: its ports stay in TIME-WAIT
    wait_for(lambda: time_waits(redis_port) >= 1000)
    time.sleep(1.5)  # the kernel reuses the ports of a TIME-WAIT over a second old only
    argv = ["/usr/bin/python3", "-c", CONNECTS, "400", str(redis_port)]
    done = subprocess.run(  # noqa: S603
        as_uid(HOST_UID_BASE + 1, argv), capture_output=True, text=True, timeout=120
    )
    assert done.stdout.strip() == "0", done


@as_root
def test_a_task_whose_uid_the_rules_do_not_cover_is_refused(
    tmp_path: Path, host_table: FirewallConfig
):
    config = FirewallConfig(**{**host_table.__dict__, "uid_span": 3})  # users 0, 1 and 2
    backend = LocalBackend(
        tmp_path / "tasks", sandbox_config=SandboxConfig(uid_base=HOST_UID_BASE), firewall=config
    )
    outside = HOST_UID_BASE + 3
    with pytest.raises(FirewallError, match=rf"uid {outside} is outside the firewall's range"):
        launch(backend, "job-1-a1", "true", [])
    assert not (backend.root / "job-1-a1" / "worker-0").exists()


def test_the_firewall_says_why_it_cannot_be_set(monkeypatch: pytest.MonkeyPatch):
    assert unavailable_reason(FirewallConfig(mode="off")) == "LOCAL_FIREWALL is off"
    missing = FirewallConfig(library="/nonexistent/libnftables.so.1")
    if os.geteuid() == 0:
        assert "is not installed (the Debian package nftables)" in str(unavailable_reason(missing))
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "does not run as root" in str(unavailable_reason(FirewallConfig()))
    assert TaskFirewall(FirewallConfig()).active is False  # auto: tasks stay open
    with pytest.raises(FirewallError, match="LOCAL_FIREWALL is on and cannot be set"):
        _ = TaskFirewall(FirewallConfig(mode="on")).active


@as_root
def test_nftables_says_in_its_own_words_why_a_script_failed():
    """The portal runs nftables' scripts through its library, in its own process: a failure
    still reads as ``nft`` would have put it, and changes nothing."""
    config = FirewallConfig(table=f"portal_absent_{os.getpid()}")
    with pytest.raises(FirewallError, match="nft failed: Error: No such file or directory"):
        run_nft(config, additions(config, [DNS_PORT]))
    assert config.table not in tables()


def test_a_table_name_nft_could_misread_is_refused():
    with pytest.raises(ValueError, match="not an nftables table name"):
        FirewallConfig(table="portal; flush ruleset")
    with pytest.raises(ValueError, match="LOCAL_FIREWALL must be one of"):
        FirewallConfig(mode="maybe")


@as_root
def test_a_table_removed_by_hand_is_built_again_before_the_next_task_starts(
    tmp_path: Path, host_table: FirewallConfig
):
    """A launch adds its ports to the table before it makes the task; where the table is gone
    (removed by ``nft``, outside the portal's own nftables context), that fails and the whole
    table is built again, all before the task runs."""
    backend = LocalBackend(
        tmp_path / "tasks",
        sandbox_config=SandboxConfig(uid_base=HOST_UID_BASE),
        firewall=host_table,
    )
    internal = free_port()
    listener = serve("::", internal)
    waiting = launch(backend, "job-1-a1", "sleep 300", [])
    assert host_table.table in tables()
    subprocess.run(  # by hand: the backend still thinks it built it
        ["nft", "-f", "-"], input=removal(host_table), text=True, check=True
    )
    prober = launch(backend, "job-2-a1", reach(internal), [])
    assert outcome(backend, prober) == {f"{internal} 127.0.0.1": "refused"}
    assert host_table.table in tables()
    backend.stop([waiting])
    wait_until_ended(backend, waiting)
    backend.cleanup([])
    listener.close()
