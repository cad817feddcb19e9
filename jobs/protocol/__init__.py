"""The OpenPAI job protocol: load v1 JSON / v2 YAML or JSON jobs into one canonical v2 form,
check them (every issue at once), render their ``<% %>`` references, mask their secrets and
export them again. Pure Python: nothing here imports Django.
"""

from jobs.protocol.dump import dump_yaml
from jobs.protocol.errors import ProtocolError, ProtocolIssue
from jobs.protocol.load import LoadedJob, load_job, normalise
from jobs.protocol.parse import MAX_JOB_BYTES
from jobs.protocol.render import (
    Callback,
    RoleCommands,
    render_callbacks,
    render_registry_auth,
    render_role,
)
from jobs.protocol.schema import json_schema
from jobs.protocol.secrets import (
    SECRET_MASK,
    SecretMasker,
    mask_secrets,
    masks_left,
    secret_masker,
)

__all__ = [
    "MAX_JOB_BYTES",
    "SECRET_MASK",
    "Callback",
    "LoadedJob",
    "ProtocolError",
    "ProtocolIssue",
    "RoleCommands",
    "SecretMasker",
    "dump_yaml",
    "json_schema",
    "load_job",
    "mask_secrets",
    "masks_left",
    "normalise",
    "render_callbacks",
    "render_registry_auth",
    "render_role",
    "secret_masker",
]
