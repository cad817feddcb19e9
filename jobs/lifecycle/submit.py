"""Submit: check a job file, choose its virtual cluster (``admit.submit_check``), queue it."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

from clusters.models import VirtualCluster
from jobs import wakeup
from jobs.errors import SubmitError
from jobs.lifecycle.admit import job_fields, submit_check
from jobs.lifecycle.events import record
from jobs.models import Job
from jobs.plugins import storage
from protocol import SECRET_MASK, LoadedJob, ProtocolError, load_job, masks_left


def submit(
    user: AbstractBaseUser,
    text: str | bytes,
    *,
    virtual_cluster: str | None = None,
    deployment: str | None = None,
) -> Job:
    """Check a job file and queue it; the one way every form and API submits."""
    try:
        loaded = load_job(text, max_bytes=settings.JOB_MAX_BYTES)
    except ProtocolError as exc:
        raise SubmitError(400, issue_lines(exc)) from None
    vc = acceptance_check(user, loaded, virtual_cluster=virtual_cluster, deployment=deployment)
    protocol = loaded.job
    roles = protocol["taskRoles"].values()
    text_value = text if isinstance(text, str) else text.decode("utf-8", "replace")
    job = Job(
        owner=user,
        name=protocol["name"],
        virtual_cluster=vc,
        submitted_text=text_value,
        source_format=loaded.source_format,
        protocol=protocol,
        task_count=sum(r["instances"] for r in roles),
        role_count=len(roles),
        gpu_count=sum(r["instances"] * r["resourcePerInstance"]["gpu"] for r in roles),
        reason="waiting to be admitted",
        **job_fields(protocol),
    )
    try:
        with transaction.atomic():
            job.save()
            record(job.id, "submitted", f"submitted by {user.get_username()} to '{vc.name}'")
            for warning in loaded.warnings:
                record(job.id, "warning", warning)
    except IntegrityError:
        raise SubmitError(
            409, [f"name: you already have a job named {protocol['name']!r}"]
        ) from None
    # No news: no page can be open on a job this new. A pass admits it.
    transaction.on_commit(wakeup.request_pass, robust=True)
    return job


def acceptance_check(
    user: AbstractBaseUser,
    loaded: LoadedJob,
    *,
    virtual_cluster: str | None = None,
    deployment: str | None = None,
) -> VirtualCluster:
    """What submit checks of a well-formed job beyond its file: masks left, ports, the
    deployment, the virtual cluster (membership and every resource the job could never get)
    and storages; the virtual cluster it goes to, else ``SubmitError``. The Submit page's live
    check asks the same, so that "Valid" means submit accepts it (issue 28)."""
    protocol = loaded.job
    if masks_left(protocol):
        raise SubmitError(400, [masked_line(path) for path in masks_left(protocol)])
    too_many = port_problems(protocol)
    if too_many:
        raise SubmitError(400, too_many)
    defaults = protocol.setdefault("defaults", {})
    if deployment:
        names = [d.get("name") for d in protocol.get("deployments", [])]
        if deployment not in names:
            raise SubmitError(400, [f"deployment: no deployment named {deployment!r} in the job"])
        defaults["deployment"] = deployment
    vc = admission_check(user, protocol, virtual_cluster or defaults.get("virtualCluster"))
    storage.check_access(user, protocol)  # teamwise_storage: 400 unknown / 403 not allowed
    return vc


def port_problems(protocol: dict[str, Any]) -> list[str]:
    """Roles asking for more ports per task than ``JOB_MAX_PORTS_PER_TASK``: each port is a
    socket held while the job is placed, and a million of them failed every placement."""
    limit = settings.JOB_MAX_PORTS_PER_TASK
    problems = []
    for role, spec in protocol["taskRoles"].items():
        ports = spec["resourcePerInstance"].get("ports") or {}
        total = sum(ports.values())
        if total > limit:
            problems.append(
                f"taskRoles.{role}.resourcePerInstance.ports: {total} ports per task in "
                f"{len(ports)} label(s), more than the limit of {limit}"
            )
    return problems


def admission_check(
    user: AbstractBaseUser, protocol: dict[str, Any], vc_name: str | None
) -> VirtualCluster:
    """The virtual cluster the job goes to, when ``user`` may use it and the job could fit."""
    try:
        return submit_check(user, protocol, vc_name)
    except PermissionError as exc:
        raise SubmitError(403, [str(exc)]) from None
    except ValueError as exc:
        raise SubmitError(400, [str(exc)]) from None


def masked_line(path: str) -> str:
    return (
        f"{path}: still {SECRET_MASK}, the mask a clone or an export shows in place of the "
        "secret: enter the secret again"
    )


def issue_lines(exc: ProtocolError) -> list[str]:
    return [f"{i.path}: {i.message}" if i.path else i.message for i in exc.issues]
