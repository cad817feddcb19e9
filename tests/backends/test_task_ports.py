"""LOCAL_TASK_PORTS: tasks' ports from a range (a container publishes it), none twice, none in
use, and a clear error when the range is spent."""

from __future__ import annotations

import socket

import pytest

from backends.local.process import free_ports


def test_ports_come_from_the_range_skipping_taken_ones_and_ones_in_use():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        start = busy.getsockname()[1]
        within = range(start, start + 6)
        got = free_ports([{"http": 2}, {"ssh": 1}], taken={start + 1}, within=within)
    ports = got[0]["http"] + got[1]["ssh"]
    assert ports == [start + 2, start + 3, start + 4]  # not the one in use, nor the taken one


def test_a_spent_range_is_an_error_naming_the_setting():
    with pytest.raises(OSError, match="LOCAL_TASK_PORTS"):
        free_ports([{"http": 3}], taken=set(), within=range(40000, 40002))


def test_without_a_range_any_free_port_is_handed_out():
    got = free_ports([{"http": 2}], taken=set())
    assert len(set(got[0]["http"])) == 2
