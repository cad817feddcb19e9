"""What one task may write to each log on the local backend is capped
(``LOCAL_TASK_LOG_MAX_BYTES``): the excess is dropped, the log ends with a line that says so,
and the task runs on to its end (it never gets SIGPIPE)."""

from __future__ import annotations

from backends.base import TaskPhase
from backends.local import LocalBackend
from clusters import registry
from tests.support.local_tasks import launch, wait_until_ended

CAP = 64 * 1024


def cap_line(cap: int) -> bytes:
    return f"\n[portal] log capped at {cap} bytes: the rest of the output was dropped\n".encode()


def capped_backend(settings, cap: int = CAP) -> LocalBackend:
    settings.LOCAL_TASK_LOG_MAX_BYTES = cap
    registry.get_backend.cache_clear()
    backend = registry.get_backend()
    assert isinstance(backend, LocalBackend)
    return backend


def test_a_task_writing_past_the_cap_runs_to_success_and_its_log_says_it_was_capped(settings):
    backend = capped_backend(settings)
    script = (
        "yes 0123456789abcdef | head -c 1000000\n"  # 15 times the cap
        "echo 'written after the cap'\n"  # a shell that got SIGPIPE would die here
        "echo 'some errors' >&2\n"
        "echo finished > finished.txt\n"
    )
    ref = launch(backend, script)
    assert wait_until_ended(backend, ref, timeout=60) == TaskPhase.SUCCEEDED
    assert backend.observe([ref])[ref].exit_code == 0
    assert (backend.work_dir(ref) / "finished.txt").read_text() == "finished\n"
    log = backend.read_log(ref, "stdout")
    assert log.endswith(cap_line(CAP))
    assert len(log) <= CAP + len(cap_line(CAP))
    assert log.startswith(b"0123456789abcdef\n")
    assert b"written after the cap" not in log  # dropped with the rest
    assert backend.read_log(ref, "stderr") == b"some errors\n"  # each stream has its own cap


def test_output_up_to_the_cap_is_kept_whole_without_a_cap_line(settings):
    backend = capped_backend(settings, cap=1000)
    ref = launch(backend, "yes x | head -c 1000\n")
    assert wait_until_ended(backend, ref, timeout=60) == TaskPhase.SUCCEEDED
    assert backend.read_log(ref, "stdout") == b"x\n" * 500


def test_by_default_a_task_may_write_a_gibibyte_per_stream(settings):
    assert settings.LOCAL_TASK_LOG_MAX_BYTES == 1024**3
    backend = registry.get_backend()
    assert isinstance(backend, LocalBackend) and backend.log_max_bytes == 1024**3
