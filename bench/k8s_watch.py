"""Kubernetes: how soon a pod's phase change reaches its job's page, and what one wake-up costs.

Against the fake API server on loopback (tests/support/fake_apiserver.py), PostgreSQL (a fresh
database ``bench_k8s_watch`` of the server at ``BENCH_PG``) and channels-redis (``BENCH_REDIS``):

- latency: a job's pod goes Running in the fake; the pod watcher (``watchcluster``'s
  ``follow``) sees the event and wakes the loop; the pass (run at once in the watcher's thread,
  as an idle worker would take the queued task: the Celery hop, one Redis push and pop, is not
  in the figure) saves the change and publishes the news; the clock stops when the job page's
  channel group receives the message that makes the page show it. Median and worst of 20, with
  few live pods and with 10,000 (``BENCH_LIVE``; ``BENCH_SAMPLES``, ``BENCH_DB``).
- cost at 10,000 live pods: the watcher's CPU for one pod event (read, parse, observe), and the
  CPU the pass that event wakes takes in the worker (thread CPU time, the database's excluded).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]
from bench._kubernetes import (  # noqa: E402
    PER_JOB,
    populate_running,
    running_status,
    setup_django,
    use_own_databases,
)

DATABASE = os.environ.get("BENCH_DB", "bench_k8s_watch")
use_own_databases(DATABASE, redis_db=13)
SAMPLES = int(os.environ.get("BENCH_SAMPLES", "20"))
LIVE = int(os.environ.get("BENCH_LIVE", "10000"))  # small ones for the suite's check
JOB = """protocolVersion: 2
name: bench
type: job
prerequisites: [{name: img, type: dockerimage, uri: python}]
taskRoles:
  worker:
    instances: 1
    dockerImage: img
    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0}
    commands: ["sleep 60"]
"""


class PageListener:
    """The channel-layer side of open job pages: a channel in each job's group, and when each
    job's news arrived."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.arrived: dict[int, float] = {}
        self.ready = threading.Event()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.channel = asyncio.run_coroutine_threadsafe(self._channel(), self.loop).result()
        asyncio.run_coroutine_threadsafe(self._receive(), self.loop)

    async def _channel(self) -> str:
        from channels.layers import get_channel_layer

        self.layer = get_channel_layer()
        return str(await self.layer.new_channel())

    def follow(self, job_id: int) -> None:
        from jobs.news import group_name

        add = self.layer.group_add(group_name(job_id), self.channel)
        asyncio.run_coroutine_threadsafe(add, self.loop).result()

    async def _receive(self) -> None:
        while True:
            message = await self.layer.receive(self.channel)
            if message.get("type") == "job.changed":
                self.arrived.setdefault(int(message["job"]), time.perf_counter())

    def wait(self, job_id: int, timeout: float = 30.0) -> float:
        deadline = time.monotonic() + timeout
        while job_id not in self.arrived:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no news of job {job_id}")
            time.sleep(0.0005)
        return self.arrived[job_id]


class Watcher:
    """``watchcluster``'s ``follow`` in a thread, recording the changed tasks as it does and
    then running the pass at once; it keeps the CPU time of each batch read and of each
    pass."""

    def __init__(self, backend: Any) -> None:
        from jobs.lifecycle.passes import reconcile

        self.backend, self.reconcile = backend, reconcile
        self.stop = threading.Event()
        self.read_cpu: list[float] = []
        self.pass_cpu: list[float] = []
        self.batches = 0
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        from django.db import connection

        from jobs.management.commands.watchcluster import follow, wake_for
        from jobs.wakeup import redis_client

        client = redis_client(os.environ["REDIS_URL"])
        mark = time.thread_time()

        def wake(changes: Any) -> None:  # what watchcluster does, then the pass at once
            nonlocal mark
            self.read_cpu.append(time.thread_time() - mark)  # reading and mapping this batch
            wake_for(changes)
            client.delete("portal:reconcile:queued")
            start = time.thread_time()
            self.reconcile(self.backend)
            self.pass_cpu.append(time.thread_time() - start)
            self.batches += 1
            mark = time.thread_time()

        follow(self.backend, self.stop, wake)
        connection.close()


def measure(cluster: Any, backend: Any, pages: PageListener, label: str) -> None:
    from django.contrib.auth.models import User

    from jobs import lifecycle
    from jobs.lifecycle.passes import run_pass
    from jobs.models import Task

    alice, _ = User.objects.get_or_create(username="alice")
    jobs = [
        lifecycle.submit(alice, JOB.replace("name: bench", f"name: b{i}-{label.split()[0]}"))
        for i in range(SAMPLES)
    ]
    run_pass(backend)  # launched: pending pods
    watcher = Watcher(backend)
    while watcher.batches == 0:  # the first list, and the pass it woke
        time.sleep(0.01)
    latencies, reads, passes = [], [], []
    for job in jobs:
        pages.follow(job.id)
        pages.arrived.pop(job.id, None)
        task = Task.objects.get(attempt__job=job)
        name = task.backend_ref.rpartition("/")[2]
        before = (len(watcher.read_cpu), len(watcher.pass_cpu))
        start = time.perf_counter()
        cluster.set_status(name, {**running_status("10.9.9.9"), "nodeName": "node-1"})
        latencies.append(pages.wait(job.id) - start)
        while len(watcher.pass_cpu) == before[1]:
            time.sleep(0.001)
        reads.append(sum(watcher.read_cpu[before[0] :]))
        passes.append(watcher.pass_cpu[-1])
    watcher.stop.set()
    cluster.bookmark()
    watcher.thread.join(30)
    median = statistics.median(latencies) * 1000
    print(f"{label}: pod Running -> job page news: median {median:.1f} ms, "
          f"worst {max(latencies) * 1000:.1f} ms ({SAMPLES} pods, aim < 300 ms)")  # fmt: skip
    print(f"{label}: one wake-up's CPU: watcher {statistics.median(reads) * 1000:.2f} ms per "
          f"pod event, the pass it wakes {statistics.median(passes) * 1000:.1f} ms "
          f"(aim < 20 ms of the worker's CPU)")  # fmt: skip
    for job in jobs:
        lifecycle.stop(job, alice)


def main() -> None:
    setup_django(DATABASE)
    from kubernetes import client

    from backends.kubernetes.api import api_client_for
    from backends.kubernetes.backend import KubernetesBackend
    from backends.kubernetes.manifests import K8sOptions
    from clusters import registry
    from tests.support.fake_apiserver import serve

    pages = PageListener()
    for live in (0, LIVE):
        with serve() as (url, cluster):
            api = api_client_for(client.Configuration(host=url))
            backend = KubernetesBackend(api, K8sOptions(namespace="default"))
            registry.get_backend = lambda backend=backend: backend  # what CLUSTER_BACKEND gives
            roomy = {"allocatable": {"cpu": "100000", "memory": "1000Ti"}}
            cluster.nodes = [{"metadata": {"name": "node-1"}, "spec": {}, "status": roomy}]
            if live:
                job_text = JOB.replace("instances: 1", f"instances: {PER_JOB}")
                populate_running(cluster, job_text, live, owner="bob", prefix="live")
            measure(cluster, backend, pages, f"{live:>6} live pods")
            api.close()


if __name__ == "__main__":
    main()
