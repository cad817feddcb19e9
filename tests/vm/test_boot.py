"""The VM runner's boot watch (``tests/support/vm.py``): a boot that hangs is given up at the
boot limit (and retried once by ``run_in_vm``), one whose job started runs to its end."""

from __future__ import annotations

from pathlib import Path

from tests.support import vm


def test_a_boot_whose_job_never_starts_is_given_up_at_the_boot_limit(tmp_path: Path):
    log, pid = tmp_path / "console.log", tmp_path / "pid"
    command = ["sh", "-c", f"echo booting; echo $$ > {pid}; exec sleep 60"]
    assert vm._boot(command, log, limit=120, boot_limit=1) == vm.BOOT_HUNG
    assert "booting" in log.read_text()
    assert not Path(f"/proc/{pid.read_text().strip()}").exists()  # killed, and reaped


def test_a_job_that_started_runs_past_the_boot_limit_to_its_end(tmp_path: Path):
    started = vm.STARTED.decode()
    command = ["sh", "-c", f"echo '{started} after 1s'; sleep 2; exit 3"]
    assert vm._boot(command, tmp_path / "console.log", limit=60, boot_limit=1) == 3
