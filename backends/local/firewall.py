"""The network of local tasks, as root: what of this host a task may reach.

A task shares the host's network (as on OpenPAI, where tasks use the host network: browsers
reach a job's TensorBoard or Jupyter on a port of the host, and tasks of a job reach each other
by the host's address and their ports). Left so, a task reaches every service on the loopback
too: a PostgreSQL that trusts local connections, a Redis without a password (the portal's
broker and its reconcile lock). So, as root with ``nft``, the portal keeps an nftables table of
its own (family ``inet``: IPv4 and IPv6) whose output chain looks only at packets of sockets
owned by the task uids (``uid_base`` to ``uid_base + uid_span - 1``; a task of portal user N
runs as ``uid_base + N``). For those, a packet to this host (all of them leave by ``lo``: the
loopback and the host's own addresses, IPv4 and IPv6) opens a connection only to a port the
backend gave a task (the set ``task_ports``), to the portal's public HTTP port(s) or to DNS;
anything else to this host is rejected at once (a TCP reset, an ICMP port unreachable: the task
sees "connection refused", not a hang). The task's replies on connections opened to it pass, so
it still answers on any port it serves. Packets to other hosts (the outside network) pass.

Why this and not a network namespace per job: a job's ports must stay reachable on the host's
addresses, which a namespace would need a forwarder (a proxy or DNAT rules) per port for, plus a
bridge, a veth pair and addresses per job, each set up and torn down with the tasks. One table on
the uid range leaves every other packet of the machine alone (the first rule sends only the task
uids' packets on) and costs one small nftables transaction per task start, made by nftables'
library in the portal's process (``Nftables``; ``bench/sandbox.py`` measures it). It uses
connection tracking (``ct direction``) for the replies, which the kernel then keeps for the
host's other connections too (bounded by ``nf_conntrack_max``; most hosts with Docker or a
firewall have it on already). Not covered: abstract UNIX sockets, which belong to the network
namespace the tasks share with the host (a service listening on one is reachable).

The table is made, or its chains' rules and its set made again, from the backend's live tasks,
in one transaction at a backend's first launch and on each cleanup, so it heals
itself after a crash or a hand edit; a table that is there keeps its chains, whose hooks stay
registered (``ruleset``: no moment without rules). A later launch adds its task's ports to the
set (``open``); the table is removed when no task of the backend runs. One table per host (its
name is fixed, ``LOCAL_FIREWALL_TABLE``): a table a portal left behind (killed, its task root
gone) is the next one's to bring up to date or remove; two portals running tasks on one host are
not supported (their task uids would be the same ones anyway).
"""

from __future__ import annotations

import ctypes
import ipaddress
import os
import re
import socket
import threading
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

MODES = ("auto", "on", "off")  # LOCAL_FIREWALL: auto is on as root with a working nftables
UID_SPAN = 1_000_000  # portal users 0 to 999999 (a task of a user above is refused, not open)
DNS_PORT = 53
TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
RTF_CACHE = 0x01000000  # linux/ipv6_route.h
LOCAL = "local"  # in closed_networks: the networks of this host's interfaces but loopback


class FirewallError(RuntimeError):
    """The task firewall is wanted and could not be set (nft missing, not root, nft failed)."""


@dataclass(frozen=True)
class FirewallConfig:
    """What the task firewall protects and lets through (``LOCAL_FIREWALL*`` settings)."""

    mode: str = "auto"
    table: str = "portal_tasks"
    uid_base: int = 200_000  # the sandbox's (LOCAL_TASK_UID_BASE)
    uid_span: int = UID_SPAN
    open_ports: tuple[int, ...] = (8000,)  # the portal's public HTTP port(s)
    # Networks no task opens a connection to (CIDRs; "local": those this host is attached to).
    closed_networks: tuple[str, ...] = ()
    library: str = "libnftables.so.1"  # nftables' (``Nftables``)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"LOCAL_FIREWALL must be one of {', '.join(MODES)}: {self.mode!r}")
        if not TABLE_NAME.fullmatch(self.table):
            raise ValueError(f"not an nftables table name: {self.table!r}")
        for network in self.closed_networks:
            if network != LOCAL:
                ipaddress.ip_network(network, strict=False)  # ValueError names it

    @property
    def uid_last(self) -> int:
        return self.uid_base + self.uid_span - 1


def ruleset(config: FirewallConfig, task_ports: Iterable[int]) -> str:
    """The whole table, made or brought to this state in one transaction. A table that is there
    keeps its chains, whose hooks stay registered: its rules and set are flushed and made again,
    which the kernel applies at once. (Replacing the table whole, delete and add, registered the
    output hook again on every cleanup; that this opened a gap was not shown, and the escapes
    the tests saw came from conntrack, below: in place is the smaller change to a live table.)"""
    ports = sorted({int(p) for p in task_ports})
    allowed = ", ".join(map(str, sorted({DNS_PORT, *config.open_ports})))
    table = f"inet {config.table}"
    # A task's answers on a connection someone opened to it pass (the reply direction); what
    # it sends on one it opened passes by the rules below, as its first packet did. Not "ct
    # state established": on the loopback the kernel gives a new connection the ports of one
    # in TIME-WAIT (tcp_tw_reuse), which conntrack then counts established: a task that tried
    # the portal's Redis 400 times got 10 connections that way.
    rules = [
        f"output meta skuid {config.uid_base}-{config.uid_last} jump task_uids",
        "task_uids ct direction reply accept",
    ]
    for family, networks in closed_networks(config.closed_networks).items():
        match = f'oifname != "lo" {family} daddr {{ {", ".join(networks)} }}'
        rules += [f"task_uids {match} meta l4proto tcp reject with tcp reset"]
        rules += [f"task_uids {match} reject with icmpx port-unreachable"]
    # ct original proto-dst: the port a task asked for, before a NAT rule of the host rewrote
    # it (Docker's DNS at 127.0.0.11:53 is redirected to a port of its own).
    rules += [
        'task_uids oifname != "lo" accept',
        "task_uids meta l4proto { tcp, udp } th dport @task_ports accept",
        f"task_uids meta l4proto {{ tcp, udp }} ct original proto-dst {{ {allowed} }} accept",
        "task_uids meta l4proto tcp reject with tcp reset",
        "task_uids reject with icmpx port-unreachable",
    ]
    elements = f"add element {table} task_ports {{ {', '.join(map(str, ports))} }}\n"
    return (
        f"add table {table}\n"
        f"add set {table} task_ports {{ type inet_service; }}\n"
        f"add chain {table} output {{ type filter hook output priority filter; policy accept; }}\n"
        f"add chain {table} task_uids\n"
        f"flush chain {table} output\n"
        f"flush chain {table} task_uids\n"
        f"flush set {table} task_ports\n"
        + (elements if ports else "")
        + "".join(f"add rule {table} {rule}\n" for rule in rules)
    )


def closed_networks(configured: Iterable[str]) -> dict[str, list[str]]:
    """``{"ip": [...], "ip6": [...]}``: the configured CIDRs, ``local`` read from the kernel's
    routes now (a container's networks change when it is attached to another)."""
    found: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
    for entry in configured:
        found += local_networks() if entry == LOCAL else [ipaddress.ip_network(entry, strict=False)]
    by_family: dict[str, list[str]] = {}
    for network in dict.fromkeys(found):
        by_family.setdefault("ip" if network.version == 4 else "ip6", []).append(str(network))
    return by_family


def local_networks(
    proc: Path = Path("/proc/net"),
) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """The networks reached without a gateway on an interface other than loopback: the
    kernel's routes (``route``, ``ipv6_route``) with no next hop, not the default route."""
    networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
    try:
        lines = (proc / "route").read_text().splitlines()[1:]
    except OSError:
        lines = []
    for line in lines:
        iface, dest, gateway, _flags, *_, mask = line.split()[:8]
        if iface == "lo" or int(gateway, 16) or not int(mask, 16):
            continue
        address = socket.inet_ntoa(int(dest, 16).to_bytes(4, "little"))
        netmask = socket.inet_ntoa(int(mask, 16).to_bytes(4, "little"))
        networks.append(ipaddress.IPv4Network(f"{address}/{netmask}", strict=False))
    try:
        lines6 = (proc / "ipv6_route").read_text().splitlines()
    except OSError:
        lines6 = []
    for line in lines6:
        fields = line.split()
        dest, length, next_hop, iface = fields[0], int(fields[1], 16), fields[4], fields[9]
        network = ipaddress.IPv6Network((int(dest, 16), length), strict=False)
        cached = int(fields[8], 16) & RTF_CACHE  # a neighbour's entry, inside a network listed
        if iface == "lo" or int(next_hop, 16) or not length or cached or network.is_multicast:
            continue
        networks.append(network)
    return networks


def additions(config: FirewallConfig, ports: Iterable[int]) -> str:
    """Adds ``ports`` to the table's set; fails where the table is not there."""
    elements = ", ".join(map(str, sorted({int(p) for p in ports})))
    return f"add element inet {config.table} task_ports {{ {elements} }}\n"


def removal(config: FirewallConfig) -> str:
    """Removes the table; no error when it is not there."""
    return f"table inet {config.table}\ndelete table inet {config.table}\n"


class Nftables:
    """nftables' own library (libnftables, which ``nft`` is a front end to) in this process: the
    same scripts, parser and error messages as ``nft -f -``, without starting a program. With
    200 ports open, adding a task's took 5.9 ms a launch with ``nft`` (about 4 ms of it CPU),
    0.25 ms here; bringing the whole table up to date 22 ms, 2.3 ms (``bench/sandbox.py``). One
    context a process (a forked one makes its own: a context holds a netlink socket), its
    calls one at a time."""

    def __init__(self, library: str) -> None:
        try:
            lib = ctypes.CDLL(library)
        except OSError:
            raise FirewallError(
                f"{library} is not installed (the Debian package nftables)"
            ) from None
        lib.nft_ctx_new.restype = ctypes.c_void_p
        lib.nft_ctx_new.argtypes = [ctypes.c_uint32]
        for name in ("nft_ctx_buffer_output", "nft_ctx_buffer_error"):
            getattr(lib, name).argtypes = [ctypes.c_void_p]
        lib.nft_ctx_set_dry_run.argtypes = [ctypes.c_void_p, ctypes.c_bool]
        lib.nft_run_cmd_from_buffer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        for name in ("nft_ctx_get_output_buffer", "nft_ctx_get_error_buffer"):
            getattr(lib, name).argtypes = [ctypes.c_void_p]
            getattr(lib, name).restype = ctypes.c_char_p
        self.lib, self.context = lib, lib.nft_ctx_new(0)  # NFT_CTX_DEFAULT
        if not self.context:
            raise FirewallError("nftables could not start (nft_ctx_new failed)")
        lib.nft_ctx_buffer_output(self.context)  # kept from this process's stdout and stderr
        lib.nft_ctx_buffer_error(self.context)
        self.lock = threading.Lock()

    def run(self, script: str, check_only: bool) -> str | None:
        """Run ``script`` as one transaction (``check_only``: checked by the kernel, nothing
        applied, as ``nft -c``); None, or nftables' own words where it failed."""
        with self.lock:
            self.lib.nft_ctx_set_dry_run(self.context, check_only)
            failed = self.lib.nft_run_cmd_from_buffer(self.context, script.encode())
            self.lib.nft_ctx_get_output_buffer(self.context)  # read, so emptied for the next
            error = (self.lib.nft_ctx_get_error_buffer(self.context) or b"").decode(
                errors="replace"
            )
        return (error.strip() or f"status {failed}") if failed else None


_NFTABLES: dict[tuple[int, str], Nftables] = {}


def run_nft(config: FirewallConfig, script: str, check_only: bool = False) -> None:
    """``script`` run by nftables as ``nft -f -`` would (``check_only``: as ``nft -c``);
    FirewallError with nftables' own words when it fails."""
    key = (os.getpid(), config.library)
    if key not in _NFTABLES:
        _NFTABLES[key] = Nftables(config.library)
    error = _NFTABLES[key].run(script, check_only)
    if error is not None:
        raise FirewallError(f"nft failed: {error}")


def unavailable_reason(config: FirewallConfig) -> str | None:
    """Why the firewall cannot be set here (off, not root, no nftables library, or the kernel
    refuses: a container without CAP_NET_ADMIN), else None. Checked as ``nft -c`` checks:
    nothing changes."""
    if config.mode == "off":
        return "LOCAL_FIREWALL is off"
    if os.geteuid() != 0:
        return "the portal does not run as root (tasks then run as its own uid)"
    try:
        run_nft(config, ruleset(config, []), check_only=True)
    except FirewallError as exc:
        return str(exc)
    return None


class TaskFirewall:
    """The firewall of one backend: ``sync`` keeps the table equal to its live tasks."""

    def __init__(self, config: FirewallConfig) -> None:
        self.config = config
        self.built = False  # this backend has built the table (it may be gone since)

    @cached_property
    def unavailable(self) -> str | None:
        """Why tasks are not fenced here (read once), None when they are."""
        return unavailable_reason(self.config)

    @property
    def active(self) -> bool:
        """Whether tasks are fenced; LOCAL_FIREWALL=on where that cannot be is an error (no
        task starts), auto then leaves them open (the system check says what they reach)."""
        if self.unavailable is not None and self.config.mode == "on":
            raise FirewallError(f"LOCAL_FIREWALL is on and cannot be set: {self.unavailable}")
        return self.unavailable is None

    def describe(self) -> str:
        """One line for the start-up output and the admin's Nodes page."""
        if self.active:
            return (
                "network: tasks reach this host only on task ports, the portal's port and DNS "
                f"(nftables table {self.config.table})"
            )
        return f"network: tasks reach every port of this host ({self.unavailable})"

    def admit(self, uid: int | None) -> None:
        """Refuse a task whose uid the rules do not cover (a portal user id past the span)."""
        if uid is None or not self.active:
            return
        if not self.config.uid_base <= uid <= self.config.uid_last:
            raise FirewallError(
                f"the task's uid {uid} is outside the firewall's range "
                f"{self.config.uid_base}-{self.config.uid_last}"
            )

    def open(self, ports: Collection[int], live_ports: Callable[[], set[int]]) -> None:
        """At a launch, before the task is made: its ports added to the set, one small
        transaction; the whole table, from ``live_ports()`` and ``ports``, where this backend has
        not built it yet or the addition fails (the table is gone: no task ran, or it was
        removed by hand). With no port, DNS's is added: a no-op that fails all the same where
        the table is gone. Where the firewall is on and cannot be set, raises."""
        if not self.active:
            return
        if self.built:
            try:
                run_nft(self.config, additions(self.config, ports or {DNS_PORT}))
                return
            except FirewallError:
                pass
        self.sync({*live_ports(), *ports}, True)

    def sync(self, task_ports: Iterable[int], tasks_running: bool) -> None:
        """The table with ``task_ports`` open, or no table when no task runs."""
        if not self.active:
            return
        script = ruleset(self.config, task_ports) if tasks_running else removal(self.config)
        run_nft(self.config, script)
        self.built = tasks_running
