"""The ``JobContext`` of a job at launch: what its tasks' environment and script are made of."""

from __future__ import annotations

from django.conf import settings

from jobs import plugins
from jobs.models import Job
from jobs.plugins import storage
from jobs.plugins.ssh import keys as ssh
from jobs.runtime.env import JobContext


def context_for(job: Job, backend_name: str = "local") -> JobContext:
    """``backend_name`` says where the job's storages are seen inside a task."""
    private, public = "", ""
    if plugins.ssh_options(job.protocol)[0]:
        private, public = ssh.job_keys(job)
    mounts = storage.mounts(job.protocol)
    return JobContext(
        user=job.owner.get_username(),
        job_name=job.name,
        virtual_cluster=job.virtual_cluster.name,
        protocol=job.protocol,
        deployment=job.protocol.get("defaults", {}).get("deployment"),
        ssh_private_key=private,
        ssh_public_key=public,
        storages=storage.locations(mounts, backend_name),
        storage_mounts=mounts,
        barrier_timeout=settings.TASK_BARRIER_TIMEOUT_SECONDS,
        debug_keep_hours=settings.DEBUG_KEEP_HOURS if plugins.is_debug(job.protocol) else 0,
    )
