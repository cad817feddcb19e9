"""Jobs in OpenPAI's REST shape (``jobStatus``, ``taskRoles.<role>.taskStatuses``).

Every field of OpenPAI's job detail is here (its ``frameworkConverter``); a reader who is not
the job's owner or an admin gets the status summary only (``full=False``): no addresses, ports,
node, container id or log URL, and no log lines in the exit spec (jobs.access).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.db.models import F, JSONField, OuterRef, Subquery
from django.http import HttpRequest
from django.urls import reverse

from jobs.access import summary_reason
from jobs.exitspec import openpai_exit, spec_retry_cause
from jobs.models import Job, JobAttempt, Task
from jobs.states import FINAL_JOB_STATES, JobState, TaskState

# The names of HiveD's job priority classes (clusters.demand.PRIORITY_CLASSES), by priority.
PRIORITY_NAMES = {1000: "crit", 100: "prod", 10: "test", 0: "default", -1: "oppo"}
TASK_UID_NAMESPACE = uuid.UUID("5b0f4a36-0c0e-4e52-9a50-3f5de0c0a3a1")


def api_base_url(request: HttpRequest) -> str:
    """``scheme://host`` of the request, for the absolute URLs OpenPAI's fields hold."""
    return request.build_absolute_uri("/").rstrip("/")


def epoch_ms(moment: datetime | None) -> int | None:
    return int(moment.timestamp() * 1000) if moment else None


SUB_STATES = {
    "WAITING": "AttemptCreationPending",
    "RUNNING": "AttemptRunning",
    "STOPPING": "AttemptDeletionPending",
}


def sub_state(state: str) -> str:
    """OpenPAI's framework-controller ``subState`` for one of our job states."""
    return SUB_STATES.get(state, "Completed")


def job_priority(priority: int) -> str:
    """OpenPAI's ``jobPriority``: the name of the HiveD class the job's priority is, else the
    number as text (``extras.priority`` may be any integer here)."""
    return PRIORITY_NAMES.get(priority, str(priority))


def task_uid(task: Task) -> str:
    """A task's stable id (OpenPAI gives the pod's uid): the same for the same task row."""
    return str(uuid.uuid5(TASK_UID_NAMESPACE, f"task-{task.pk}"))


def container_gpus(job: Job, role: str) -> str | None:
    """OpenPAI's ``containerGpus``: a bit per GPU index of the task (2^n - 1 for n GPUs), as
    text, the type its contract gives it."""
    spec = job.protocol.get("taskRoles", {}).get(role)
    if spec is None:
        return None
    return str(2 ** int(spec["resourcePerInstance"].get("gpu", 0)) - 1)


def container_log(job: Job, task: Task, base_url: str, stream: str = "stdout") -> str:
    """Where the task's ``stream`` is read (OpenPAI gives its log manager's URL); "" before
    the task has started."""
    if not task.backend_ref:
        return ""
    path = reverse(
        "api-task-log",
        kwargs={
            "username": job.owner.username,
            "name": job.name,
            "attempt": task.attempt.number,
            "task": f"{task.role}-{task.index}",
            "stream": stream,
        },
    )
    return base_url + path


def debug_id(job: Job | int) -> str:
    """OpenPAI's ``debugId`` is the framework's name, the backend's (k8s.js
    ``convertFrameworkSummary``, ``convertFrameworkDetail``): ours is the attempt's ``key``; a
    job that has made no attempt yet has none, and this stands in."""
    return f"job-{job if isinstance(job, int) else job.pk}"


def task_log_list_url(job: Job, attempt: int, task: Task, base_url: str) -> str:
    """OpenPAI's log list of one task attempt (k8s.js ``convertTaskDetail``'s ``containerLog``):
    ``.../attempts/<job attempt>/taskRoles/<role>/taskIndex/<i>/attempts/<task attempt>/logs``."""
    path = reverse(
        "api-task-attempt-logs",
        kwargs={
            "username": job.owner.username,
            "name": job.name,
            "attempt": attempt,
            "role": task.role,
            "index": task.index,
            "task_attempt": task.retries,
        },
    )
    return base_url + path


def task_status(
    task: Task, job: Job | None = None, *, full: bool = True, base_url: str = ""
) -> dict[str, Any]:
    owner_job = job or task.attempt.job
    body: dict[str, Any] = {
        "taskIndex": task.index,
        "taskUid": task_uid(task),
        "taskState": task.state,
        "containerId": task.backend_ref,
        "containerIp": task.ip,
        "containerPorts": {label: ",".join(map(str, ports)) for label, ports in task.ports.items()},
        "containerGpus": container_gpus(owner_job, task.role),
        "containerLog": container_log(owner_job, task, base_url),
        "containerNodeName": task.node,
        "containerExitCode": task.exit_code,
        "containerExitDiagnostics": task.diagnostics,
        "containerExitSpec": exit_spec(task, full=full),
        "retries": task.retries,
        "accountableRetries": task.accountable_retries,
        "createdTime": epoch_ms(task.created_at),
        "launchedTime": epoch_ms(task.started_at),
        "completedTime": epoch_ms(task.completed_at),
        # OpenPAI's task attempt (k8s.js convertTaskDetail): its id counts the task's retries
        # within the job attempt, and its times are those of the task's current run.
        "attemptId": task.retries,
        "attemptState": task.state,
        "currentAttemptCreatedTime": epoch_ms(task.created_at),
        "currentAttemptLaunchedTime": epoch_ms(task.started_at),
        "currentAttemptCompletedTime": epoch_ms(task.completed_at),
    }
    if not full:
        # The summary: where the task runs and what it wrote stay its owner's.
        body.update(
            containerId=None,
            containerIp=None,
            containerPorts={},
            containerLog="",
            containerNodeName=None,
            containerExitDiagnostics=None,
        )
    return body


def exit_spec(task: Task, *, full: bool = True) -> dict[str, Any] | None:
    """The exit spec's explanation of how the task ended (jobs.exitspec), or None, with
    OpenPAI's ``code`` and ``type`` for the same failure (``originalCode``: the task's own)."""
    spec = task.exit_spec or {}
    if not spec:
        return None
    lines = spec.get("lines", [])
    openpai = openpai_exit(spec.get("id"), spec.get("exit_code"), lines)
    reason = spec.get("reason")
    if not full and lines:
        reason = spec.get("phrase")  # the reason quotes a log line: logs are the owner's
    body: dict[str, Any] = {
        "code": openpai.code,
        "originalCode": spec.get("exit_code"),
        "phrase": spec.get("phrase"),  # ours, clearer than OpenPAI's name for it
        "openpaiPhrase": openpai.phrase,
        "type": openpai.type,
        "stage": openpai.stage,
        "behavior": openpai.behavior,
        "reaction": openpai.reaction,
        "reason": reason,
        "portalType": spec.get("type"),
        # OpenPAI's exit spec: ``solution`` a list of strings.
        "solution": [spec["solution"]] if spec.get("solution") else [],
        "matchedLines": lines if full else [],
    }
    return body


def exit_trigger(job: Job, tasks: list[Task]) -> Task | None:
    """The task that decided a failed or stopped job (the first to end)."""
    if job.state not in ("FAILED", "STOPPED"):
        return None
    ended = [t for t in tasks if t.exit_spec and t.state in ("FAILED", "STOPPED")]
    failed = [t for t in ended if t.state == "FAILED"] or ended
    if not failed:
        return None
    return min(failed, key=lambda t: (t.completed_at is None, t.completed_at, t.role, t.index))


def app_exit_spec(job: Job, tasks: list[Task], *, full: bool = True) -> dict[str, Any] | None:
    first = exit_trigger(job, tasks)
    spec = exit_spec(first, full=full) if first else None
    return {**spec, "taskRole": first.role, "taskIndex": first.index} if first and spec else None


def app_exit_messages(
    job: Job, trigger: Task | None, spec: dict[str, Any] | None, reason: str
) -> dict[str, Any] | None:
    """OpenPAI's ``appExitMessages``: what the runtime said of the task that ended the job
    (its exit code, reason and the exit spec's explanation), and the launcher's diagnostics."""
    if not job.reason and trigger is None:
        return None
    runtime = None
    if trigger is not None and spec is not None:
        runtime = {
            "originUserExitCode": trigger.exit_code,
            "errorLogs": {"platform": "", "user": "\n".join(spec["matchedLines"])},
            "name": f"{trigger.role}-{trigger.index}",
            "exitCode": spec["code"],
            "reason": spec["reason"],
            "solution": spec["solution"],
        }
    return {"container": None, "runtime": runtime, "launcher": reason or None}


NO_RETRIES = {"user": 0, "platform": 0, "resource": 0}


def retry_details(job: Job) -> dict[str, int]:
    return retry_details_by_job({job.pk: job.retries})[job.pk]


def retry_details_by_job(retries: dict[int, int]) -> dict[int, dict[str, int]]:
    """OpenPAI's split of ``retries`` by cause, for jobs given as id -> retries, in one query
    (none when no job retried). Each retried attempt (attempts 0 to ``retries - 1``; the last
    one is running or final) counts under the cause of its first failed task
    (``exitspec.spec_retry_cause``: ``user`` the accountable ones, as OpenPAI's), or under
    ``resource`` when the attempt was preempted (stopped, and the job went on)."""
    counts = {job_id: dict(NO_RETRIES) for job_id in retries}
    retried = [job_id for job_id, number in retries.items() if number]
    if not retried:
        return counts
    # The first failed task of each attempt, found in SQL: a retried attempt of a large job
    # may hold thousands of failed tasks.
    first_failed = (
        Task.objects.filter(attempt=OuterRef("pk"), state=TaskState.FAILED)
        .exclude(exit_spec={})
        .order_by(F("completed_at").asc(nulls_last=True), "role", "index")
        .values("exit_spec")[:1]
    )
    attempts = (
        JobAttempt.objects.filter(job_id__in=retried, number__lt=F("job__retries"))
        .annotate(trigger=Subquery(first_failed, output_field=JSONField()))
        .values_list("job_id", "state", "trigger")
    )
    for job_id, state, spec in attempts:
        preempted = state == JobState.STOPPED
        counts[job_id]["resource" if preempted else spec_retry_cause(spec)] += 1
    for job_id in retried:  # an attempt row gone (never made) counts as the user's too
        counts[job_id]["user"] += max(0, retries[job_id] - sum(counts[job_id].values()))
    return counts


def job_detail(
    job: Job,
    attempt: JobAttempt | None,
    tasks: list[Task],
    *,
    full: bool = True,
    base_url: str = "",
) -> dict[str, Any]:
    roles: dict[str, Any] = {
        role: {"taskRoleStatus": {"name": role}, "taskStatuses": []}
        for role in job.protocol["taskRoles"]
    }
    for task in sorted(tasks, key=lambda t: (t.role, t.index)):
        roles.setdefault(task.role, {"taskRoleStatus": {"name": task.role}, "taskStatuses": []})
        status = task_status(task, job, full=full, base_url=base_url)
        roles[task.role]["taskStatuses"].append(status)
    trigger = exit_trigger(job, tasks)
    spec = app_exit_spec(job, tasks, full=full)
    # Another user reads the reason without the log line it quotes and with addresses masked.
    reason = job.reason if full else summary_reason(job.reason)
    return {
        "debugId": attempt.key if attempt else debug_id(job),
        "name": job.name,
        "tags": list(job.tags),  # OpenPAI's detail has them here (k8s.js convertFrameworkDetail)
        "jobStatus": {
            "username": job.owner.username,
            "state": job.state,
            "subState": sub_state(job.state),
            "attemptState": attempt.state if attempt else job.state,
            "executionType": "STOP" if job.state in ("STOPPING", "STOPPED") else "START",
            "virtualCluster": job.virtual_cluster.name,
            "retries": job.retries,
            "retryDetails": retry_details(job),
            "retryDelayTime": None,
            "attemptIndex": attempt.number if attempt else None,
            # OpenPAI's name for the index of the attempt shown (k8s.js convertFrameworkDetail).
            "attemptId": attempt.number if attempt else None,
            "submissionTime": epoch_ms(job.created_at),
            "createdTime": epoch_ms(job.created_at),
            "launchedTime": epoch_ms(job.started_at),
            "completedTime": epoch_ms(job.completed_at),
            "appId": attempt.key if attempt else "",
            "appProgress": 1 if job.state in FINAL_JOB_STATES else 0,
            "appTrackingUrl": "",
            "appCreatedTime": epoch_ms(attempt.created_at) if attempt else None,
            "appLaunchedTime": epoch_ms(attempt.created_at) if attempt else None,
            "appCompletedTime": epoch_ms(attempt.completed_at) if attempt else None,
            "appExitCode": job.exit_code,
            "appExitDiagnostics": reason,
            "appExitSpec": spec,
            "appExitMessages": app_exit_messages(job, trigger, spec, reason),
            "appExitTriggerMessage": spec["reason"] if spec else None,
            "appExitTriggerTaskRoleName": trigger.role if trigger else None,
            "appExitTriggerTaskIndex": trigger.index if trigger else None,
            "appExitType": spec["type"] if spec else None,
            "reason": reason,
            "waitingReason": reason if job.state == "WAITING" else None,
            "queuePosition": job.queue_position if job.state == "WAITING" else None,
            "jobPriority": job_priority(job.priority),
            "priority": job.priority,
            "opportunistic": job.opportunistic,
            "preemptible": job.borrowing,
            "totalTaskNumber": job.task_count,
            "totalTaskRoleNumber": len(job.protocol["taskRoles"]),
            "totalGpuNumber": job.gpu_count,
            "tags": list(job.tags),
        },
        "taskRoles": roles,
    }


def task_detail(
    job: Job, attempt: int, task: Task, *, full: bool = True, base_url: str = ""
) -> dict[str, Any]:
    """One task with its attempts, as OpenPAI answers ``.../attempts/<n>/taskRoles/<role>/
    taskIndex/<i>/attempts`` (frameworkConverter.js ``convertToTaskDetail``). A task retried
    within its job attempt keeps one row here, so ``attempts`` holds its current run only
    (``attemptId``: the retries before it); OpenPAI lists the earlier runs after it."""
    status = task_status(task, job, full=full, base_url=base_url)
    run = {
        key: status[key]
        for key in (
            "attemptId",
            "attemptState",
            "currentAttemptCreatedTime",
            "currentAttemptLaunchedTime",
            "currentAttemptCompletedTime",
            "containerId",
            "containerIp",
            "containerNodeName",
            "containerPorts",
            "containerGpus",
            "containerExitCode",
            "containerExitSpec",
            "containerExitDiagnostics",
        )
    }
    started = full and bool(task.backend_ref)
    run["containerLog"] = task_log_list_url(job, attempt, task, base_url) if started else ""
    return {
        "username": job.owner.username,
        "jobName": job.name,
        "jobAttemptId": attempt,
        "taskRoleName": task.role,
        **{
            key: status[key]
            for key in (
                "taskIndex",
                "taskUid",
                "taskState",
                "retries",
                "accountableRetries",
                "createdTime",
                "launchedTime",
                "completedTime",
            )
        },
        "attempts": [run],
    }
