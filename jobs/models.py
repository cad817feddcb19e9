from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, models
from django.db.models import ProtectedError, QuerySet
from django.db.models.deletion import Collector
from django.utils import timezone

from clusters.models import DEFAULT_VIRTUAL_CLUSTER, VirtualCluster
from jobs.model_fields import OrderedJSONField
from jobs.states import FINAL_JOB_STATES, LIVE_JOB_STATES, JobState, TaskState


def elapsed(start: datetime | None, end: datetime | None) -> timedelta | None:
    """How long something ran: until ``end``, or until now while it goes on."""
    return None if start is None else (end or timezone.now()) - start


class JobManager(models.Manager["Job"]):
    def set_standing(self, standing: dict[int, tuple[str, int]]) -> None:
        """Set waiting jobs' (reason, queue position), where they changed, in one statement.

        Written out (on PostgreSQL) because an admission pass writes every waiting job's
        standing when the queue moves, and ``bulk_update``'s CASE per row cost 3.8-4.0 s for
        10,000 jobs against 0.7-0.9 s in all for the pass with this statement
        (``bench/admission.py``, first pass at 10,000 jobs, on the development machine).
        """
        if not standing:
            return
        ids = list(standing)
        if connection.vendor != "postgresql":
            jobs = [Job(id=i, reason=standing[i][0], queue_position=standing[i][1]) for i in ids]
            self.bulk_update(jobs, ["reason", "queue_position"], batch_size=500)
            return
        table = connection.ops.quote_name(self.model._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {table} AS j SET reason = v.reason, queue_position = v.pos"  # noqa: S608
                " FROM unnest(%s::bigint[], %s::text[], %s::int[]) AS v(id, reason, pos)"
                " WHERE j.id = v.id AND j.state = %s"
                " AND (j.reason IS DISTINCT FROM v.reason"
                " OR j.queue_position IS DISTINCT FROM v.pos)",
                [
                    ids,
                    [standing[i][0] for i in ids],
                    [standing[i][1] for i in ids],
                    JobState.WAITING,
                ],
            )


def keep_finished_jobs(
    collector: Collector, field: models.Field[Any, Any], sub_objs: QuerySet[Job], using: str
) -> None:
    """What deleting a virtual cluster does to its jobs (``Job.virtual_cluster``'s on_delete):
    refused while one of them is live (``ProtectedError``, whose ``protected_objects`` are the
    live jobs); its finished jobs move to ``default``, so that their history stays. Here, so
    that clusters need not know jobs."""
    live = list(sub_objs.filter(state__in=LIVE_JOB_STATES).only("id"))
    if live:  # Django's collector says which; ``protected_objects`` are these jobs
        raise ProtectedError("live jobs", live)
    if not sub_objs.exists():
        return
    deleted = collector.data.get(VirtualCluster, set())
    if any(vc.name == DEFAULT_VIRTUAL_CLUSTER for vc in deleted):
        raise ProtectedError("the default's finished jobs have nowhere to go", list(sub_objs))
    default = VirtualCluster.objects.named(DEFAULT_VIRTUAL_CLUSTER)
    collector.add_field_update(field, default, sub_objs)


keep_finished_jobs.lazy_sub_objs = True  # type: ignore[attr-defined]  # called without reading them


class Job(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="jobs"
    )
    name = models.CharField(max_length=255)
    virtual_cluster = models.ForeignKey(
        VirtualCluster, on_delete=keep_finished_jobs, related_name="jobs"
    )
    # The text as submitted (it may hold secrets in clear: never shown; pages use `protocol`).
    submitted_text = models.TextField()
    source_format = models.CharField(max_length=8, default="v2")
    # The canonical v2 form (the protocol package); secrets are masked whenever it is shown.
    protocol = OrderedJSONField()
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.WAITING)
    reason = models.TextField(blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    # attempts made - 1: the retries after a failure and the restarts after a preemption
    retries = models.PositiveIntegerField(default=0)
    task_count = models.PositiveIntegerField(default=0)
    gpu_count = models.PositiveIntegerField(default=0)
    role_count = models.PositiveIntegerField(default=1)  # OpenPAI's totalTaskRoleNumber
    # Admission (clusters.quota): what the job asks for in total, its order and its standing.
    resources = models.JSONField(default=dict)  # {"cpu", "memoryMB", "gpus": {type: n}}
    priority = models.IntegerField(default=0)
    opportunistic = models.BooleanField(default=False)  # may run on other VCs' idle quota
    borrowing = models.BooleanField(default=False)  # running on idle quota: preemptible
    queue_position = models.PositiveIntegerField(null=True, blank=True)  # 1 = next in its VC
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    # The job's SSH key pair (ssh plugin, jobssh): the private key only ever goes to its owner.
    ssh_private_key = models.TextField(blank=True)
    ssh_public_key = models.TextField(blank=True)
    tags = models.JSONField(default=list, blank=True)  # OpenPAI's job tags (API: .../tag)

    objects = JobManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="job_name_unique_per_owner")
        ]
        indexes = [
            models.Index(fields=["owner", "-created_at"], name="job_owner_recent"),
            models.Index(fields=["state", "created_at"], name="job_state_fifo"),
            # The job list filtered by state and sorted by name walks it (else: sort them all).
            models.Index(fields=["state", "name", "id"], name="job_state_name"),
        ]

    def __str__(self) -> str:
        return f"{self.owner.username}~{self.name}"

    @property
    def is_final(self) -> bool:
        return self.state in FINAL_JOB_STATES

    @property
    def duration(self) -> timedelta | None:
        return elapsed(self.started_at, self.completed_at)


class JobAttempt(models.Model):
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveIntegerField()  # 0 for the first attempt, as OpenPAI counts
    key = models.SlugField(max_length=63, unique=True)  # the backend's name for it
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.RUNNING)
    reason = models.TextField(blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job", "number"], name="attempt_number_unique")
        ]
        ordering = ["job", "number"]

    def __str__(self) -> str:
        return f"{self.job} attempt {self.number}"


class Task(models.Model):
    attempt = models.ForeignKey(JobAttempt, on_delete=models.CASCADE, related_name="tasks")
    role = models.CharField(max_length=64)
    index = models.PositiveIntegerField()
    state = models.CharField(max_length=16, choices=TaskState.choices, default=TaskState.WAITING)
    # Where peers reach the task, fixed at placement (an IP, or a DNS name on Kubernetes); the
    # task's environment is rendered from it, also for a retry. ``ip`` is what was observed.
    address = models.CharField(max_length=255, blank=True)
    ip = models.CharField(max_length=64, blank=True)
    ports = OrderedJSONField(default=dict)  # label -> ports, in the order the job declares
    exit_code = models.IntegerField(null=True, blank=True)
    diagnostics = models.TextField(blank=True)
    retries = models.PositiveIntegerField(default=0)
    # OpenPAI's accountableRetries: the retries after a failure that was not transient
    # (jobs.exitspec.is_accountable).
    accountable_retries = models.PositiveIntegerField(default=0)
    backend_ref = models.CharField(max_length=255, blank=True)
    node = models.CharField(max_length=255, blank=True)
    stop_requested = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    # jobs.exitspec's explanation of how the task ended (phrase, type, reason, solution, lines).
    exit_spec = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["attempt", "role", "index"], name="task_unique")
        ]
        indexes = [
            models.Index(fields=["state"], name="task_state"),
            # A wake-up finds the tasks it was told of by ref, among every task ever run.
            models.Index(fields=["backend_ref"], name="task_backend_ref"),
        ]
        ordering = ["attempt", "id"]

    def __str__(self) -> str:
        return f"{self.role}-{self.index}"

    @property
    def duration(self) -> timedelta | None:
        return elapsed(self.started_at, self.completed_at)


class JobEvent(models.Model):
    """What happened to a job and its tasks, for people to read."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    attempt_number = models.IntegerField(null=True, blank=True)
    task = models.CharField(max_length=80, blank=True)  # "<role>-<index>" or ""
    kind = models.CharField(max_length=32)
    message = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "time": self.created_at.isoformat(),
            "attempt": self.attempt_number,
            "task": self.task,
            "kind": self.kind,
            "message": self.message,
        }


class TaskUsage(models.Model):
    """One sample of what a running task used (``jobs.usage``): every ``USAGE_SAMPLE_SECONDS``
    while it runs, thinned as it ages (one a minute past 10 minutes, one per 10 minutes past 6
    hours) and deleted ``USAGE_RETENTION_DAYS`` after its job ended. A thinned row stands for
    its bucket: CPU and GPU utilisation averaged, memory and GPU memory at their peak."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="usage")
    time = models.DateTimeField()
    cpu = models.FloatField(null=True)  # cores used since the previous sample
    cpu_seconds = models.FloatField(null=True)  # the backend's cumulative count, for the rate
    memory_bytes = models.BigIntegerField(null=True)
    gpu_util = models.FloatField(null=True)  # percent, averaged over the task's GPUs
    gpu_memory_bytes = models.BigIntegerField(null=True)

    class Meta:
        indexes = [
            models.Index(fields=["task", "time"], name="task_usage_task_time"),
            models.Index(fields=["time"], name="task_usage_time"),  # thinning finds by age
        ]
        ordering = ["task", "time"]

    def __str__(self) -> str:
        return f"{self.task} at {self.time:%H:%M:%S}"
