"""A JSON Schema (draft 2020-12) of the v2 job format, as ``load_job`` accepts it.

The schema states the shape (types, patterns, minimums, known fields); rules that relate
fields to each other (a role's ``dockerImage`` names a dockerimage prerequisite, references
name something, ``require`` has no cycle...) are checked by ``load_job`` only.
"""

from __future__ import annotations

import copy
from typing import Any

from protocol.checks import C_IDENTIFIER
from protocol.notify_extras import JOB_EVENTS, MAX_WAITING_MINUTES
from protocol.prereqs import AUTH_KEYS, CMD_PLUGIN, EVENTS, KNOWN, NAME
from protocol.v2 import V1_NAME, V1_ROLE

_INT = {"type": "integer"}
_STRINGS = {"type": "array", "items": {"type": "string"}}
# null: the default (OpenPAI's checker allows it)
_MIN_COUNT = {"anyOf": [{"const": -1}, {"type": "integer", "minimum": 1}, {"type": "null"}]}


def _object(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = required
    return schema


_CALLBACK = _object(
    {
        "event": {"enum": list(EVENTS)},
        "commands": _STRINGS,
        "failurePolicy": {"enum": ["ignore", "fail"]},
    },
    ["event", "commands"],
)

_PREREQUISITE: dict[str, Any] = {
    "type": "object",
    "required": ["name", "type"],
    "properties": {
        "protocolVersion": {"enum": [2, "2"]},
        "name": {"type": "string", "pattern": "^[a-zA-Z0-9_-]+$", "maxLength": 255},
        "type": {"enum": ["data", "script", "dockerimage", "output"]},
        "version": {"type": ["string", "number"]},
        "contributor": {"type": "string"},
        "description": {"type": "string"},
        "auth": {
            "type": "object",
            "properties": {k: {"type": "string"} for k in AUTH_KEYS},
            "additionalProperties": True,
        },
        "uri": {"anyOf": [{"type": "string"}, {**_STRINGS, "minItems": 1}]},
        "plugin": {"type": "string"},
        "require": _STRINGS,
        "callbacks": {"type": "array", "items": _CALLBACK},
        "failurePolicy": {"enum": ["ignore", "fail"]},
    },
    "additionalProperties": True,
    "allOf": [
        {
            "if": {"properties": {"type": {"const": "dockerimage"}}},
            "then": {
                "required": ["uri"],
                "properties": {"uri": {"type": "string"}},
                "propertyNames": {"enum": list(KNOWN)},
            },
        },
        {
            "if": {"properties": {"type": {"not": {"const": "data"}}}},
            "then": {"properties": {"uri": {"type": "string"}}},
        },
        {
            "if": {"properties": {"type": {"not": {"const": "dockerimage"}}}},
            "then": {
                "not": {"required": ["auth"]},
                "properties": {"plugin": {"const": CMD_PLUGIN}},
            },
            "else": {"not": {"required": ["callbacks"]}},
        },
    ],
}

_TASK_ROLE = _object(
    {
        "protocolVersion": {"enum": [2, "2"]},
        "instances": {"type": "integer", "minimum": 1, "default": 1},
        "completion": _object(
            {"minFailedInstances": _MIN_COUNT, "minSucceededInstances": _MIN_COUNT}
        ),
        "taskRetryCount": {"type": "integer", "minimum": 0, "default": 0},
        "dockerImage": {"type": "string"},
        "data": {"type": "string"},
        "output": {"type": "string"},
        "script": {"type": "string"},
        "prerequisites": _STRINGS,
        "extraContainerOptions": _object(
            {
                "shmMB": {"type": "integer", "minimum": 1, "default": 64},
                "infiniband": {"type": "boolean", "default": False},
            }
        ),
        "resourcePerInstance": _object(
            {
                "cpu": {"type": "integer", "minimum": 1},
                "memoryMB": {"type": "integer", "minimum": 1},
                "gpu": {"type": "integer", "minimum": 0},
                "ports": {  # the labels' pattern: _NAMES
                    "type": "object",
                    "additionalProperties": {"type": "integer", "minimum": 1},
                },
            },
            ["cpu", "memoryMB", "gpu"],
        ),
        "commands": {**_STRINGS, "minItems": 1},
    },
    ["resourcePerInstance", "commands"],
)

_COMMANDS = {**_STRINGS, "minItems": 1}
_DEPLOYMENT: dict[str, Any] = {
    "type": "object",
    "required": ["name", "taskRoles"],
    "properties": {
        "name": {"type": "string", "pattern": NAME.pattern},
        "taskRoles": {
            "type": "object",
            "minProperties": 1,
            "additionalProperties": _object({"preCommands": _COMMANDS, "postCommands": _COMMANDS}),
        },
    },
}


def _names(job: str, role: str) -> dict[str, Any]:
    """The patterns of the job's name, its task roles' names and their port labels."""
    ports = {"ports": {"propertyNames": {"pattern": role}}}
    return {
        "properties": {
            "name": {"pattern": job},
            "taskRoles": {
                "propertyNames": {"pattern": role},
                "additionalProperties": {
                    "properties": {"resourcePerInstance": {"properties": ports}}
                },
            },
        }
    }


# A job converted from v1 (``extras.v1`` is an object) keeps v1's names, which may hold ``.`` and
# ``~`` (as ``load_job`` allows them); a v2 job of its own may not.
_NAMES = {
    "if": {
        "required": ["extras"],
        "properties": {"extras": {"required": ["v1"], "properties": {"v1": {"type": "object"}}}},
    },
    "then": _names(V1_NAME.pattern, V1_ROLE.pattern),
    "else": _names(NAME.pattern, C_IDENTIFIER.pattern),
}

# extras.notify (protocol.notify_extras): which of the job's ends its owner is told of.
_NOTIFY = _object(
    {
        "events": {"type": "array", "items": {"enum": list(JOB_EVENTS)}},
        "email": {"type": "boolean"},
        "webhook": {"type": "boolean"},
        "waitingMinutes": {"type": "integer", "minimum": 1, "maximum": MAX_WAITING_MINUTES},
    }
)

_JOB = _object(
    {
        "protocolVersion": {"enum": [2, "2"]},
        "name": {"type": "string", "maxLength": 255},  # its pattern: _NAMES
        "type": {"const": "job"},
        "version": {"type": ["string", "number"]},
        "contributor": {"type": "string"},
        "description": {"type": "string"},
        "prerequisites": {"type": "array", "items": _PREREQUISITE},
        "parameters": {"type": "object"},
        "secrets": {"type": "object"},
        "jobRetryCount": {"type": "integer", "minimum": 0, "default": 0},
        "taskRoles": {
            "type": "object",
            "minProperties": 1,
            "additionalProperties": _TASK_ROLE,  # the names' pattern: _NAMES
        },
        "deployments": {"type": "array", "items": _DEPLOYMENT},
        "defaults": {
            "type": "object",
            "properties": {"virtualCluster": {"type": "string"}, "deployment": {"type": "string"}},
            "additionalProperties": True,
        },
        "extras": {"type": "object", "properties": {"notify": _NOTIFY}},
    },
    ["protocolVersion", "name", "type", "taskRoles"],
)


def json_schema() -> dict[str, Any]:
    """A fresh copy of the schema (callers may change it)."""
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://openpai.readthedocs.io/job-protocol-v2.schema.json",
        "title": "OpenPAI job protocol v2",
        **_JOB,
        **_NAMES,
    }
    return copy.deepcopy(schema)
