"""What the Kubernetes benchmarks (``k8s_watch``, ``reconcile``) share: a fresh PostgreSQL
database and Redis database of their own, and running tasks in it with their pods in the fake
API server (tests/support/fake_apiserver.py)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from typing import Any

PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
PER_JOB = 10  # tasks of each job's one role


def use_own_databases(name: str, redis_db: int) -> None:
    """The settings of a benchmark of its own, before Django is imported: the database
    ``name`` of the server at ``BENCH_PG``, Redis database ``redis_db`` (``BENCH_REDIS``
    elsewhere) and a var directory named after it (``BENCH_VAR_DIR``)."""
    os.environ.update(
        DATABASE_URL=f"{PG}/{name}",
        REDIS_URL=os.environ.get("BENCH_REDIS", f"redis://127.0.0.1:6379/{redis_db}"),
        PORTAL_VAR_DIR=os.environ.get(
            "BENCH_VAR_DIR", os.path.join(tempfile.gettempdir(), f"{name}_var")
        ),
        DJANGO_SETTINGS_MODULE="portal.settings",
        LOG_LEVEL="WARNING",
    )


def setup_django(name: str) -> None:
    """The database ``name`` created afresh and migrated, Django set up."""
    for sql in (f"DROP DATABASE IF EXISTS {name}", f"CREATE DATABASE {name}"):
        subprocess.run(["psql", f"{PG}/postgres", "-qc", sql], check=True)  # noqa: S603, S607
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def running_status(ip: str) -> dict[str, Any]:
    """The status of a pod whose ``main`` container runs."""
    state = {"running": {"startedAt": "2026-01-02T03:04:05Z"}}
    return {"phase": "Running", "podIP": ip,
            "containerStatuses": [{"name": "main", "state": state}]}  # fmt: skip


def populate_running(
    cluster: Any,
    job_text: str,
    tasks: int,
    *,
    owner: str,
    prefix: str,
    ports: dict[str, list[int]] | None = None,
) -> None:
    """``tasks`` running tasks in the database, in jobs ``<prefix>-<i>`` of ``owner`` of
    ``PER_JOB`` tasks each (``job_text``'s one role ``worker``), and their running pods in the
    fake ``cluster``."""
    from django.contrib.auth.models import User
    from django.utils import timezone

    from backends.kubernetes import manifests as m
    from clusters.models import VirtualCluster
    from jobs.lifecycle.launch import attempt_key
    from jobs.models import Job, JobAttempt, Task
    from protocol import load_job

    user, _ = User.objects.get_or_create(username=owner)
    vc, _ = VirtualCluster.objects.get_or_create(name="default")
    protocol = load_job(job_text).job
    now, node = timezone.now(), "node-1"
    jobs = Job.objects.bulk_create(
        Job(owner=user, name=f"{prefix}-{i}", virtual_cluster=vc, submitted_text=job_text,
            protocol=protocol, state="RUNNING", started_at=now, task_count=PER_JOB)
        for i in range(tasks // PER_JOB)
    )  # fmt: skip
    attempts = JobAttempt.objects.bulk_create(
        JobAttempt(job=job, number=0, key=attempt_key(job, 0), created_at=now) for job in jobs
    )
    rows = []
    for attempt in attempts:
        for index in range(PER_JOB):
            name = m.pod_name(attempt.key, f"worker-{index}", 0)
            ip = f"10.{attempt.id % 250}.{index}.{attempt.id // 250 % 250}"
            rows.append(Task(attempt=attempt, role="worker", index=index, state="RUNNING",
                             ip=ip, node=node, ports=ports or {}, started_at=now,
                             backend_ref=f"{attempt.key}/{name}"))  # fmt: skip
            cluster.put_pod({"metadata": {"name": name, "labels": m.labels(attempt.key)},
                             "spec": {"nodeName": node}, "status": running_status(ip)})  # fmt: skip
    Task.objects.bulk_create(rows, batch_size=2000)
