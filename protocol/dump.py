"""Export a canonical job as v2 YAML (multi-line strings as literal blocks)."""

from __future__ import annotations

from typing import Any

import yaml


class _Dumper(yaml.SafeDumper):
    pass


_LINE_BREAKS = ("\x85", "\u2028", "\u2029", "\ufeff", "\r")


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    # Characters a YAML reader treats as line breaks survive only double-quoted (escaped).
    if any(mark in data for mark in _LINE_BREAKS):
        style: str | None = '"'
    else:
        style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _represent_str)


def dump_yaml(job: dict[str, Any]) -> str:
    """The job as YAML; ``load_job(dump_yaml(job)).job == job`` for a canonical job.

    Secrets are written as they are: mask them first (``mask_secrets``) for anyone to see.
    """
    text: str = yaml.dump(
        job,
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=100,
    )
    return text
