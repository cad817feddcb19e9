"""The ssh plugin's key pair: one per job, made when its first task launches, kept on the Job;
the private key is only ever sent to the job's owner (``jobs:ssh-key``)."""

from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from jobs.models import Job


def new_key_pair(comment: str) -> tuple[str, str]:
    """(private key in OpenSSH format, ``ssh-ed25519 ... comment`` public key)."""
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    ).decode()
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return private, f"{public.decode()} {comment}"


def job_keys(job: Job) -> tuple[str, str]:
    """The job's key pair, made now when it has none (compare-and-swap: one pair per job)."""
    if not job.ssh_private_key:
        private, public = new_key_pair(f"{job.owner.get_username()}~{job.name}")
        Job.objects.filter(id=job.id, ssh_private_key="").update(
            ssh_private_key=private, ssh_public_key=public
        )
        job.ssh_private_key, job.ssh_public_key = (
            Job.objects.filter(id=job.id).values_list("ssh_private_key", "ssh_public_key").get()
        )
    return job.ssh_private_key, job.ssh_public_key
