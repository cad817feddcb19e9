"""Kubernetes: how soon a pod's phase change reaches its job's page, and what one wake-up costs.

Against the fake API server on loopback (tests/support/fake_apiserver.py), PostgreSQL (a fresh
database ``bench_k8s_watch`` of the server at ``BENCH_PG``) and channels-redis (``BENCH_REDIS``):

- latency: a job's pod goes Running in the fake; the pod watcher (``watchcluster``'s
  ``follow``) sees the event and wakes the loop; the pass (run at once in the watcher's thread,
  as an idle worker would take the queued task: the Celery hop, one Redis push and pop, is not
  in the figure) saves the change and publishes the news; the clock stops when the job page's
  channel group receives the message that makes the page show it. Median and worst of 20, with
  few live pods and with 10,000.
- cost at 10,000 live pods: the watcher's CPU for one pod event (read, parse, observe), and the
  CPU the pass that event wakes takes in the worker (thread CPU time, the database's excluded).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
os.environ.update(
    DATABASE_URL=f"{PG}/bench_k8s_watch",
    REDIS_URL=os.environ.get("BENCH_REDIS", "redis://127.0.0.1:6379/13"),
    PORTAL_VAR_DIR=os.environ.get(
        "BENCH_VAR_DIR", os.path.join(tempfile.gettempdir(), "bench_k8s_watch_var")
    ),
    DJANGO_SETTINGS_MODULE="portal.settings",
    LOG_LEVEL="WARNING",
)
sys.path[:0] = [str(ROOT)]
SAMPLES = 20
LIVE = 10_000
PER_JOB = 10
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


def setup_django() -> None:
    for sql in ("DROP DATABASE IF EXISTS bench_k8s_watch", "CREATE DATABASE bench_k8s_watch"):
        subprocess.run(["psql", f"{PG}/postgres", "-qc", sql], check=True)  # noqa: S607
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def running_status(ip: str) -> dict[str, Any]:
    state = {"running": {"startedAt": "2026-01-02T03:04:05Z"}}
    return {"phase": "Running", "podIP": ip, "nodeName": "node-1",
            "containerStatuses": [{"name": "main", "state": state}]}  # fmt: skip


def populate_live(cluster: Any, count: int) -> None:
    """``count`` running tasks in the database (jobs of 10) and their pods in the fake."""
    from django.contrib.auth.models import User
    from django.utils import timezone

    from clusters.backends.kubernetes import manifests as m
    from clusters.models import VirtualCluster
    from jobs.models import Job, JobAttempt, Task
    from jobs.protocol import load_job

    user, _ = User.objects.get_or_create(username="bob")
    vc, _ = VirtualCluster.objects.get_or_create(name="default")
    protocol = load_job(JOB.replace("instances: 1", f"instances: {PER_JOB}")).job
    now = timezone.now()
    jobs = Job.objects.bulk_create(
        Job(owner=user, name=f"live-{i}", virtual_cluster=vc, submitted_text=JOB,
            protocol=protocol, state="RUNNING", started_at=now, task_count=PER_JOB)
        for i in range(count // PER_JOB)
    )  # fmt: skip
    attempts = JobAttempt.objects.bulk_create(
        JobAttempt(job=job, number=0, key=f"job{job.id}-a0", created_at=now) for job in jobs
    )
    rows = []
    for attempt in attempts:
        for index in range(PER_JOB):
            name = m.pod_name(attempt.key, f"worker-{index}", 0)
            ip = f"10.{attempt.id % 250}.{index}.{attempt.id // 250 % 250}"
            rows.append(Task(attempt=attempt, role="worker", index=index, state="RUNNING",
                             ip=ip, node="node-1", started_at=now,
                             backend_ref=f"{attempt.key}/{name}"))  # fmt: skip
            pod = {"metadata": {"name": name, "labels": m.labels(attempt.key)},
                   "spec": {"nodeName": "node-1"}, "status": running_status(ip)}  # fmt: skip
            cluster.put_pod(pod)
    Task.objects.bulk_create(rows, batch_size=2000)


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
    """``watchcluster``'s loop in a thread, the wake-up running the pass at once; it keeps the
    CPU time of each batch read and of each pass."""

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

        from jobs.wakeup import redis_client

        client = redis_client(os.environ["REDIS_URL"])
        mark = time.thread_time()
        for changes in self.backend.watch(self.stop):
            self.read_cpu.append(time.thread_time() - mark)  # reading and mapping this batch
            if changes.observations or changes.resync:
                client.delete("portal:reconcile:queued")
                start = time.thread_time()
                self.reconcile(self.backend)
                self.pass_cpu.append(time.thread_time() - start)
            self.batches += 1
            if self.stop.is_set():
                break
            mark = time.thread_time()
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
        cluster.set_status(name, running_status("10.9.9.9"))
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
    setup_django()
    from kubernetes import client

    from clusters import registry
    from clusters.backends.kubernetes.api import api_client_for
    from clusters.backends.kubernetes.backend import KubernetesBackend
    from clusters.backends.kubernetes.manifests import K8sOptions
    from tests.support.fake_apiserver import serve

    pages = PageListener()
    for live in (0, LIVE):
        with serve() as (url, cluster):
            api = api_client_for(client.Configuration(host=url))
            backend = KubernetesBackend(api, K8sOptions(namespace="default"))
            registry.get_backend = lambda backend=backend: backend  # what CLUSTER_BACKEND gives
            roomy = {"allocatable": {"cpu": "100000", "memory": "100000Ti"}}
            cluster.nodes = [{"metadata": {"name": "node-1"}, "spec": {}, "status": roomy}]
            if live:
                populate_live(cluster, live)
            measure(cluster, backend, pages, f"{live:>6} live pods")
            api.close()


if __name__ == "__main__":
    main()
