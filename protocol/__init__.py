"""The OpenPAI job protocol: load v1 JSON / v2 YAML or JSON jobs into one canonical v2 form,
check them (every issue at once), render their ``<% %>`` references, mask their secrets and
export them again. Pure Python: nothing here imports Django.
"""

from protocol.dump import dump_yaml
from protocol.errors import ProtocolError, ProtocolIssue
from protocol.load import LoadedJob, load_job, normalise
from protocol.parse import MAX_JOB_BYTES
from protocol.render import (
    Callback,
    RoleCommands,
    render_callbacks,
    render_registry_auth,
    render_role,
)
from protocol.schema import json_schema
from protocol.secrets import (
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
