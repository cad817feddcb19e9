"""LOCAL_TASK_PORTS: tasks' ports from a range (a container publishes it), none twice, none in
use, and a clear error when the range is spent."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from backends.local.process import free_ports


def quiet_window(size: int) -> range:
    """Ports below the kernel's ephemeral range, all free now: outgoing connections of other
    tests take ephemeral ports, which would make a window there change under the test."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for start in range(low - 2000, low - size, size):
        window = range(start, start + size)
        probes = [socket.socket() for _ in window]
        try:
            for sock, port in zip(probes, window, strict=True):
                sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            for sock in probes:
                sock.close()
        return window
    raise AssertionError("no free window of ports below the ephemeral range")


def test_ports_come_from_the_range_skipping_taken_ones_and_ones_in_use():
    within = quiet_window(6)
    start = within.start
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", start))
        busy.listen()
        got = free_ports([{"http": 2}, {"ssh": 1}], taken={start + 1}, within=within)
    ports = got[0]["http"] + got[1]["ssh"]
    assert ports == [start + 2, start + 3, start + 4]  # not the one in use, nor the taken one


def test_a_spent_range_is_an_error_naming_the_setting():
    with pytest.raises(OSError, match="LOCAL_TASK_PORTS"):
        free_ports([{"http": 3}], taken=set(), within=range(40000, 40002))


def test_without_a_range_any_free_port_is_handed_out():
    got = free_ports([{"http": 2}], taken=set())
    assert len(set(got[0]["http"])) == 2
