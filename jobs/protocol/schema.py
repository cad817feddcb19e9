"""A JSON Schema (draft 2020-12) of the v2 job format, as ``load_job`` accepts it.

The schema states the shape (types, patterns, minimums, known fields); rules that relate
fields to each other (a role's ``dockerImage`` names a dockerimage prerequisite, references
name something, ``require`` has no cycle...) are checked by ``load_job`` only.
"""

from __future__ import annotations

import copy
from typing import Any

from jobs.protocol.prereqs import AUTH_KEYS, EVENTS, KNOWN

_INT = {"type": "integer"}
_STRINGS = {"type": "array", "items": {"type": "string"}}
_C_NAME = "^[a-zA-Z_][a-zA-Z0-9_]*$"
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
        "commands": {**_STRINGS, "minItems": 1},
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
            "then": {"not": {"required": ["auth"]}},
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
                "ports": {
                    "type": "object",
                    "propertyNames": {"pattern": _C_NAME},
                    "additionalProperties": {"type": "integer", "minimum": 1},
                },
            },
            ["cpu", "memoryMB", "gpu"],
        ),
        "commands": {**_STRINGS, "minItems": 1},
    },
    ["resourcePerInstance", "commands"],
)

_DEPLOYMENT: dict[str, Any] = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "taskRoles": {
            "type": "object",
            "additionalProperties": _object({"preCommands": _STRINGS, "postCommands": _STRINGS}),
        },
    },
}

_JOB = _object(
    {
        "protocolVersion": {"enum": [2, "2"]},
        "name": {"type": "string", "pattern": "^[a-zA-Z0-9_-]+$", "maxLength": 255},
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
            "propertyNames": {"pattern": _C_NAME},
            "additionalProperties": _TASK_ROLE,
        },
        "deployments": {"type": "array", "items": _DEPLOYMENT},
        "defaults": {
            "type": "object",
            "properties": {"virtualCluster": {"type": "string"}, "deployment": {"type": "string"}},
            "additionalProperties": True,
        },
        "extras": {"type": "object"},
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
    }
    return copy.deepcopy(schema)
