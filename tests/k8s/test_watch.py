"""The watch on the portal's pods against the strict fake API server: it resumes from its
resourceVersion after a break, lists again after 410 Gone, follows bookmarks, and wakes the
reconcile loop (``manage.py watchcluster``) so that a pod's change reaches its job with no
periodic pass."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.db import connection
from test_kubernetes_backend import launch_all, name_of, running, terminated

import jobs.tasks
from backends.base import SupportsWatch, TaskPhase, WatchedChanges
from backends.kubernetes.backend import KubernetesBackend
from backends.kubernetes.watch import PodBatch
from jobs import lifecycle, wakeup
from jobs.lifecycle.passes import run_pass
from jobs.management.commands.watchcluster import follow, wake_for
from jobs.models import Task
from jobs.states import TaskState
from jobs.wakeup import QUEUED_KEY
from tests.jobs.samples import hello_job
from tests.support.fake_cluster import FakeCluster
from tests.waiting import wait_for


class Follower:
    """Reads an iterator in a thread of its own, so that a test can change the cluster while
    the watch waits, and take the batches one by one (never blocking for ever)."""

    def __init__(self, items: Iterator[Any]) -> None:
        self.items: queue.Queue[Any] = queue.Queue()
        self.thread = threading.Thread(target=self.pump, args=(items,), daemon=True)
        self.thread.start()

    def pump(self, items: Iterator[Any]) -> None:
        try:
            for item in items:
                self.items.put(item)
        except BaseException as exc:  # shown by next() instead of lost in the thread
            self.items.put(exc)

    def next(self) -> Any:
        item = self.items.get(timeout=30)
        if isinstance(item, BaseException):
            raise item
        return item


@pytest.fixture
def stop(cluster: FakeCluster) -> Iterator[threading.Event]:
    """Set at the end of the test; a bookmark then lets the watch see it and end."""
    event = threading.Event()
    yield event
    event.set()
    cluster.bookmark()


def pod_names(batch: PodBatch) -> list[str]:
    return [event.pod["metadata"]["name"] for event in batch.events]


def test_a_watch_that_breaks_mid_stream_resumes_from_its_version_and_loses_nothing(
    k8s: KubernetesBackend, cluster: FakeCluster, stop: threading.Event
):
    first, second, _ = (name_of(ref) for ref in launch_all(k8s))
    watch = k8s.pod_watch(stop)
    batches = Follower(watch.batches())
    listed = batches.next()
    assert listed.resync and len(listed.events) == 3

    cluster.set_status(first, running("10.0.0.1", "node-a"))
    assert pod_names(batches.next()) == [first]
    seen = watch.version
    assert seen == str(cluster.revision)
    with cluster.lock:  # the watch is cut before it can send what changes next
        cluster.break_watches()
        cluster.set_status(second, running("10.0.0.2", "node-a"))
    resumed = batches.next()
    assert pod_names(resumed) == [second] and not resumed.resync
    assert resumed.events[0].pod["status"]["phase"] == "Running"
    assert (watch.lists, watch.resumes) == (1, 1)  # no relist: the watch went on from there
    assert cluster.watch_queries[-1]["resourceVersion"] == seen
    assert cluster.watch_queries[-1]["allowWatchBookmarks"] == "true"


def test_a_watch_waits_out_an_outage_with_backoff_and_resumes_where_it_was(
    k8s: KubernetesBackend, cluster: FakeCluster, stop: threading.Event, sleeps: list[float]
):
    first = name_of(launch_all(k8s)[0])
    watch = k8s.pod_watch(stop)
    batches = Follower(watch.batches())
    batches.next()
    wait_for(lambda: cluster.watching)
    with cluster.lock:  # the stream breaks, and the next three calls find the server down
        cluster.fail_next(3, 503)
        cluster.break_watches()
        cluster.set_status(first, running("10.0.0.1", "node-a"))
    assert pod_names(batches.next()) == [first]
    assert len(sleeps) == 4  # one wait per failure, each within its growing bound
    assert all(delay <= 0.2 * 2**n for n, delay in enumerate(sleeps))
    assert (watch.lists, watch.resumes) == (1, 4)


def test_a_410_gone_lists_again_and_the_watch_goes_on_from_the_new_list(
    k8s: KubernetesBackend, cluster: FakeCluster, stop: threading.Event
):
    first, second, _ = (name_of(ref) for ref in launch_all(k8s))
    watch = k8s.pod_watch(stop)
    batches = Follower(watch.batches())
    batches.next()
    # A change the watch never sees: its connection breaks first, and by the time it resumes
    # from its version the history is compacted past it (a 200 answer with an ERROR 410).
    with cluster.lock:
        cluster.break_watches()
        cluster.set_status(first, running("10.0.0.1", "node-a"))
        cluster.compact()
    relisted = batches.next()
    assert relisted.resync and watch.lists == 2
    pods = {event.pod["metadata"]["name"]: event.pod for event in relisted.events}
    assert pods[first]["status"]["phase"] == "Running"  # what was missed is in the list
    assert relisted.version == str(cluster.revision)

    cluster.set_status(second, running("10.0.0.2", "node-a"))
    assert pod_names(batches.next()) == [second]  # watching again, from the new list's version
    assert watch.lists == 2


def test_an_http_410_answer_to_the_watch_request_lists_again_too(
    k8s: KubernetesBackend, cluster: FakeCluster, stop: threading.Event
):
    """The other form of "too old" (client-go's reflector handles both): the watch request
    itself answered 410 rather than a 200 stream with an ERROR event."""
    first = name_of(launch_all(k8s)[0])
    watch = k8s.pod_watch(stop)
    batches = Follower(watch.batches())
    assert batches.next().resync
    wait_for(lambda: cluster.watching)
    with cluster.lock:  # the watch breaks; its resume is answered 410
        cluster.fail_next(1, 410)
        cluster.break_watches()
    relisted = batches.next()
    assert relisted.resync and watch.lists == 2
    cluster.set_status(first, running("10.0.0.1", "node-a"))
    assert pod_names(batches.next()) == [first]


def test_an_open_watch_goes_on_through_a_compaction_as_the_watch_cache_keeps_its_events(
    k8s: KubernetesBackend, cluster: FakeCluster, stop: threading.Event
):
    first = name_of(launch_all(k8s)[0])
    watch = k8s.pod_watch(stop)
    batches = Follower(watch.batches())
    batches.next()
    wait_for(lambda: cluster.watching)  # open, from the listed version
    with cluster.lock:
        cluster.set_status(first, running("10.0.0.1", "node-a"))
        cluster.compact()
    assert pod_names(batches.next()) == [first]
    assert watch.lists == 1  # no 410, no relist


def test_a_bookmark_moves_the_version_on_so_a_resume_needs_no_relist(
    k8s: KubernetesBackend, cluster: FakeCluster, stop: threading.Event
):
    first = name_of(launch_all(k8s)[0])
    watch = k8s.pod_watch(stop)
    batches = Follower(watch.batches())
    batches.next()
    listed_at = watch.version
    wait_for(lambda: cluster.watching)  # the watch is open (a bookmark goes to open ones)
    cluster.touch()  # changes the watch does not select move the version on
    cluster.bookmark()
    marked = batches.next()
    assert marked.events == [] and watch.version == str(cluster.revision) != listed_at
    with cluster.lock:  # history before the bookmark is compacted, then the watch breaks
        cluster.compact()
        cluster.break_watches()
        cluster.set_status(first, running("10.0.0.1", "node-a"))
    assert pod_names(batches.next()) == [first]
    assert watch.lists == 1  # resumed from the bookmark's version: no 410, no relist


def test_the_watch_gives_task_observations_and_a_deleted_pod_is_gone(
    k8s: KubernetesBackend, cluster: FakeCluster, stop: threading.Event
):
    refs = launch_all(k8s)
    assert isinstance(k8s, SupportsWatch)
    changes = Follower(k8s.watch(stop))
    listed = changes.next()
    assert listed.resync and set(listed.observations) == set(refs)
    assert {o.phase for o in listed.observations.values()} == {TaskPhase.PENDING}

    cluster.set_status(name_of(refs[0]), running("10.0.0.1", "node-a"))
    seen = changes.next().observations
    assert seen[refs[0]].phase == TaskPhase.RUNNING and seen[refs[0]].ip == "10.0.0.1"

    cluster.set_status(name_of(refs[1]), terminated("Failed", 3, "Error", "node-b"))
    failed = changes.next().observations[refs[1]]
    assert (failed.phase, failed.exit_code) == (TaskPhase.FAILED, 3)

    cluster.delete("pods", "default", name_of(refs[2]))  # never scheduled: it goes at once
    assert changes.next().observations == {refs[2]: k8s.observe([refs[2]])[refs[2]]}
    assert k8s.observe([refs[2]])[refs[2]].phase == TaskPhase.GONE


@pytest.mark.django_db(transaction=True)
def test_a_pods_phase_change_reaches_its_job_through_the_watcher_with_no_periodic_pass(
    alice,
    k8s: KubernetesBackend,
    cluster: FakeCluster,
    stop: threading.Event,
    monkeypatch,
    settings,
):
    job = lifecycle.submit(alice, hello_job("watched", command="sleep 60"))
    run_pass(k8s)  # launched: its pod is pending
    task = Task.objects.get(attempt__job=job)
    assert task.state == TaskState.WAITING and task.backend_ref
    # No worker runs in the tests (nor does beat): the pass the watcher asks for runs at once,
    # in the watcher's thread, as the worker would run it.
    monkeypatch.setattr(wakeup, "send_reconcile", lambda countdown=None: jobs.tasks.reconcile())
    monkeypatch.setattr(jobs.tasks, "get_backend", lambda: k8s)
    redis.Redis.from_url(settings.REDIS_URL).delete(QUEUED_KEY)  # left by the submit's request
    woken: list[WatchedChanges] = []

    def wake(changes: WatchedChanges) -> None:
        wake_for(changes)  # a relist asks for a full pass, a pod's change for its task's
        woken.append(changes)

    def watch() -> None:
        try:
            follow(k8s, stop, wake)
        finally:
            connection.close()  # the passes' connection, opened in this thread

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    wait_for(lambda: woken)  # the first list woke it once, and that pass is over
    task.refresh_from_db()
    assert task.state == TaskState.WAITING
    cluster.set_status(name_of(task.backend_ref), running("10.0.0.7", "node-a"))

    def state() -> str:
        task.refresh_from_db()
        return str(task.state) if task.state == TaskState.RUNNING else ""

    wait_for(state)
    assert task.ip == "10.0.0.7"
    wait_for(lambda: len(woken) == 2)  # the pod's change woke the loop once more
    assert woken[0].resync and not woken[1].resync
    assert list(woken[1].observations) == [task.backend_ref]
    stop.set()
    cluster.bookmark()
    watcher.join(30)
    assert not watcher.is_alive()
