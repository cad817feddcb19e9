"""The barrier on Kubernetes: peers' addresses are DNS names, set from the start, so it waits
until each one resolves (getent, else nslookup, else it trusts the name); IPs pass as before.
The rendered barrier runs under /bin/sh with stand-in lookup tools on its PATH."""

from __future__ import annotations

import subprocess
from pathlib import Path

from backends.kubernetes import manifests as m
from jobs.runtime.script import BARRIER_TIMEOUT_CODE, barrier

PEERS = {
    "PAI_HOST_IP_worker_0": "worker-0.pai-job7-a0",
    "PAI_HOST_IP_worker_1": "worker-1.pai-job7-a0",
    "PAI_HOST_IP_ps_0": "10.0.0.7",
}


def lookup_tool(bin_dir: Path, name: str, known: list[str], fail_first: int = 0) -> Path:
    """A stand-in ``getent hosts NAME`` or ``nslookup NAME`` (plain /bin/sh) that knows the
    ``known`` names once it has been asked ``fail_first`` times; it logs every call."""
    calls = bin_dir / f"{name}.calls"
    tool = bin_dir / name
    tool.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {calls}\n'
        f"n=0; while read -r _; do n=$((n + 1)); done < {calls}\n"
        f'[ "$n" -gt {fail_first} ] || exit 2\n'
        "for host; do :; done\n"  # the last argument
        f'for known in {" ".join(known)}; do [ "$host" = "$known" ] && exit 0; done\n'
        "exit 2\n"
    )
    tool.chmod(0o755)
    return calls


def run_barrier(tmp_path: Path, path: str, timeout: int) -> subprocess.CompletedProcess[str]:
    """The rendered barrier under /bin/sh with ``PATH=path``, then ``echo through``."""
    exports = "".join(f"export {name}={value}\n" for name, value in PEERS.items())
    say = 'portal_say() { echo "[portal] $*" >&2; }\n'
    return subprocess.run(  # noqa: S603
        ["/bin/sh", "-c", exports + say + barrier(PEERS, timeout) + "echo through\n"],
        env={"PATH": path, "PAI_WORK_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def tools_dir(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    return bin_dir


WORKERS = [PEERS["PAI_HOST_IP_worker_0"], PEERS["PAI_HOST_IP_worker_1"]]


def test_the_barrier_waits_until_every_peers_name_resolves(tmp_path: Path):
    bin_dir = tools_dir(tmp_path)
    calls = lookup_tool(bin_dir, "getent", WORKERS, fail_first=1)  # not resolvable yet
    done = run_barrier(tmp_path, f"{bin_dir}:/usr/bin:/bin", timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "through\n"
    assert "barrier passed" in done.stderr
    asked = calls.read_text().splitlines()
    assert asked.count("hosts worker-0.pai-job7-a0") == 2  # it waited for the name
    assert "hosts 10.0.0.7" not in asked  # an IP is no name to look up


def test_a_name_that_never_resolves_times_the_barrier_out(tmp_path: Path):
    bin_dir = tools_dir(tmp_path)
    lookup_tool(bin_dir, "getent", WORKERS[:1])
    done = run_barrier(tmp_path, f"{bin_dir}:/usr/bin:/bin", timeout=0)
    assert done.returncode == BARRIER_TIMEOUT_CODE
    assert (
        "[portal] barrier timed out after 0s: no address for "
        "PAI_HOST_IP_worker_1 (worker-1.pai-job7-a0 does not resolve)"
    ) in done.stderr
    assert "through" not in done.stdout


def test_without_getent_nslookup_answers(tmp_path: Path):
    bin_dir = tools_dir(tmp_path)
    calls = lookup_tool(bin_dir, "nslookup", WORKERS[:1])
    done = run_barrier(tmp_path, str(bin_dir), timeout=0)  # no getent on this PATH
    assert done.returncode == BARRIER_TIMEOUT_CODE
    assert "worker-1.pai-job7-a0 does not resolve" in done.stderr
    assert "worker-0.pai-job7-a0 does not resolve" not in done.stderr
    assert calls.read_text().splitlines() == WORKERS


def test_without_any_lookup_tool_a_set_name_is_trusted(tmp_path: Path):
    done = run_barrier(tmp_path, str(tools_dir(tmp_path)), timeout=0)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "through\n"


def test_the_attempts_service_publishes_pods_before_they_are_ready():
    service = m.service("job7-a0")
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
