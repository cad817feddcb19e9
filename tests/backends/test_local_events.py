"""A local task's end is news at once: its wrapper leaves a file in ``.ended`` and the backend's
watch (``LocalBackend.watch``, which ``manage.py watchcluster`` follows as it follows
Kubernetes' pods) gives the task's observation."""

from __future__ import annotations

import os
import queue
import shutil
import signal
import threading
from collections.abc import Callable, Iterator

import pytest

from backends import ended
from backends.base import TaskPhase, WatchedChanges
from backends.ended import ENDED_DIR, WatchLost, ended_marker
from backends.local import LocalBackend
from backends.local.sandbox import SandboxConfig
from jobs.management.commands.watchcluster import follow
from tests.support.local_tasks import launch, phase_of, wait_until_ended
from tests.waiting import wait_for


@pytest.fixture
def listening(backend: LocalBackend) -> Iterator[Callable[[Callable[[list[str]], None]], None]]:
    """Follows the backend's watch in a thread as watchcluster does, handing the refs of each
    batch to ``on_ended``; stops it at the end."""
    stop = threading.Event()
    threads: list[threading.Thread] = []

    def start(on_ended: Callable[[list[str]], None]) -> None:
        def wake(changes: WatchedChanges) -> None:
            on_ended(list(changes.observations))

        thread = threading.Thread(target=follow, args=(backend, stop, wake))
        thread.start()
        threads.append(thread)

    yield start
    stop.set()
    for thread in threads:
        thread.join(10)
        assert not thread.is_alive()


def test_the_watch_gives_an_ended_tasks_observation(backend):
    stop = threading.Event()
    batches = backend.watch(stop)
    ref = launch(backend, "exit 3\n")
    seen = next(batches).observations
    assert list(seen) == [ref] and (seen[ref].phase, seen[ref].exit_code) == (TaskPhase.FAILED, 3)
    stop.set()
    assert list(batches) == []  # stops within a moment, no batch left


def test_an_ended_task_is_handed_over_once_and_its_file_removed(backend, listening):
    handed: queue.Queue[list[str]] = queue.Queue()
    listening(handed.put)
    ref = launch(backend, "exit 3\n")
    assert handed.get(timeout=30) == [ref]
    assert (backend.root / ref / "exit_code").read_text() == "3"  # written before the news
    wait_for(lambda: not ended_marker(backend.root, ref).exists())
    with pytest.raises(queue.Empty):
        handed.get(timeout=0.5)


def test_a_task_launched_again_after_it_ended_is_news_again(backend):
    # A pass that died after the launch, before it saved the ref: the watch's news of the
    # end named a ref nobody knew. The pass that launches it again (the same task) saves it
    # RUNNING, so its end must be told once more.
    ref = launch(backend, "true\n")
    wait_for(lambda: ended_marker(backend.root, ref).exists())
    ended_marker(backend.root, ref).unlink()  # handed over, as the listener does
    assert launch(backend, "true\n") == ref
    assert ended_marker(backend.root, ref).exists()
    assert phase_of(backend, ref) == TaskPhase.SUCCEEDED  # the same task, not run again


def test_ends_seen_while_the_listener_is_down_or_failing_are_handed_over_later(backend, listening):
    first = launch(backend, "true\n", key="job-1-a1")
    wait_until_ended(backend, first)
    wait_for(lambda: ended_marker(backend.root, first).exists())  # nobody listens yet

    failures = 0
    handed: queue.Queue[list[str]] = queue.Queue()

    def flaky(refs: list[str]) -> None:  # Redis down for the first two tries
        nonlocal failures
        if failures < 2:
            failures += 1
            raise ConnectionError("redis is down")
        handed.put(refs)

    listening(flaky)
    assert handed.get(timeout=30) == [first]
    second = launch(backend, "true\n", key="job-2-a1")
    assert handed.get(timeout=30) == [second]
    assert failures == 2


def test_files_that_name_no_task_are_dropped(backend, listening):
    handed: queue.Queue[list[str]] = queue.Queue()
    (backend.root / ENDED_DIR).mkdir(parents=True)
    (backend.root / ENDED_DIR / "no-plus-sign").touch()
    listening(handed.put)
    wait_for(lambda: not (backend.root / ENDED_DIR / "no-plus-sign").exists())
    assert handed.empty()


def test_a_process_that_escaped_with_a_pipe_cannot_hold_the_exit_code_back(tmp_path):
    """It runs in a session of its own, so the wrapper cannot kill it, and holds stdout open;
    the log readers never see the end of their pipe, and the watchdog releases the wrapper.
    Unsandboxed (an admin's task where bwrap is missing, or ``LOCAL_SANDBOX=False``): in the
    sandbox the end of the task's pid namespace takes every process with it."""
    backend = LocalBackend(tmp_path / "tasks", sandbox_config=SandboxConfig(enabled=False))
    ref = launch(backend, "setsid sleep 300 &\necho $! >escaped.pid\necho done\n")
    assert wait_until_ended(backend, ref, timeout=60).value == "succeeded"
    # The wrapper writes the exit code, then the marker: a moment apart.
    wait_for(lambda: ended_marker(backend.root, ref).exists(), timeout=10)
    escaped = int((backend.root / ref / "escaped.pid").read_text())
    os.kill(escaped, signal.SIGKILL)


def test_the_listener_stops_when_its_directory_goes_away(backend):
    """A watch on a removed directory would never fire again: the listener exits (and its
    supervisor starts a new one on the new directory) instead of hanging."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            follow(backend, threading.Event(), lambda changes: None)
        except WatchLost as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    wait_for(lambda: (backend.root / ENDED_DIR).exists())
    shutil.rmtree(backend.root / ENDED_DIR)
    thread.join(30)
    assert not thread.is_alive() and len(errors) == 1


def test_a_directory_removed_before_the_listener_reads_it_is_a_lost_watch(tmp_path, monkeypatch):
    """The removal can come before inotify reports it: between the watch and the first read of
    the directory, or before the watch is set. Either way the listener says its watch is lost
    (what the supervisor restarts on), not a stray FileNotFoundError."""
    watch = ended.inotify_on

    def watch_then_remove(directory):
        fd = watch(directory)
        shutil.rmtree(directory)
        return fd

    monkeypatch.setattr(ended, "inotify_on", watch_then_remove)
    with pytest.raises(WatchLost):
        next(ended.ended_batches(tmp_path, threading.Event()))
    with pytest.raises(WatchLost):
        watch(tmp_path / "never made")
