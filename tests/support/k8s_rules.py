"""What a real Kubernetes API server checks, for the fake one: label selectors, object names,
label keys and values, and the Secret size limit, with the Status bodies the real server answers
(422 ``Invalid`` with one cause per broken rule, 400 ``BadRequest`` for a selector it cannot
parse). The messages follow k8s.io/apimachinery's validation."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MAX_SECRET_BYTES = 1024 * 1024  # api.MaxSecretSize
DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN = rf"{DNS1123_LABEL}(\.{DNS1123_LABEL})*"
DNS1035_LABEL = "[a-z]([-a-z0-9]*[a-z0-9])?"
QUALIFIED_NAME = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_VALUE = f"(({QUALIFIED_NAME})?)"
CONFIG_KEY = "[-._a-zA-Z0-9]+"

SUBDOMAIN_RULE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
    f"used for validation is '{DNS1123_SUBDOMAIN}')"
)
LABEL_RULE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    f"used for validation is '{DNS1123_LABEL}')"
)
DNS1035_RULE = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    f"'abc-123', regex used for validation is '{DNS1035_LABEL}')"
)
NAME_PART_RULE = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used "
    f"for validation is '{QUALIFIED_NAME}')"
)
VALUE_RULE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    f"'my_value',  or '12345', regex used for validation is '{LABEL_VALUE}')"
)


@dataclass(frozen=True)
class Cause:
    field: str
    message: str  # "Invalid value: ...", "Too long: ..."


def status(code: int, reason: str, message: str, **extra: Any) -> dict[str, Any]:
    """A ``metav1.Status`` body as the API server sends it with an error."""
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}  # fmt: skip
    if extra:
        body["details"] = extra
    return body


def invalid(kind: str, name: str, causes: list[Cause]) -> dict[str, Any]:
    """The 422 the API server answers a create that breaks validation rules."""
    said = [f"{c.field}: {c.message}" for c in causes]
    message = f'{kind} "{name}" is invalid: ' + (
        said[0] if len(said) == 1 else f"[{', '.join(said)}]"
    )
    return status(
        422, "Invalid", message, name=name, kind=kind.lower() + "s",
        causes=[{"reason": "FieldValueInvalid" if c.message.startswith("Invalid") else
                 "FieldValueTooLong", "message": c.message, "field": c.field} for c in causes],
    )  # fmt: skip


def _value(value: str) -> str:
    return f"Invalid value: {value!r}".replace("'", '"')


def _check_name(value: str, field: str, longest: int, pattern: str, rule: str) -> list[Cause]:
    """The real server's causes for a name longer than ``longest`` or not of ``pattern``."""
    causes = []
    if len(value) > longest:
        causes.append(Cause(field, f"{_value(value)}: must be no more than {longest} characters"))
    if not re.fullmatch(pattern, value):
        causes.append(Cause(field, f"{_value(value)}: {rule}"))
    return causes


def check_subdomain(value: str, field: str) -> list[Cause]:
    return _check_name(value, field, 253, DNS1123_SUBDOMAIN, SUBDOMAIN_RULE)


def check_label(value: str, field: str) -> list[Cause]:
    return _check_name(value, field, 63, DNS1123_LABEL, LABEL_RULE)


def check_dns1035(value: str, field: str) -> list[Cause]:
    return _check_name(value, field, 63, DNS1035_LABEL, DNS1035_RULE)


def check_labels(labels: dict[str, str], field: str = "metadata.labels") -> list[Cause]:
    """Keys: an optional DNS subdomain prefix and ``/``, then a name of at most 63 characters;
    values: at most 63 characters of the same alphabet, or empty."""
    causes = []
    for key, value in labels.items():
        prefix, _, name = key.rpartition("/")
        if prefix:
            causes += [Cause(field, f"{_value(key)}: prefix part {c.message.split(': ', 1)[1]}")
                       for c in check_subdomain(prefix, field)]  # fmt: skip
        if not name or len(name) > 63:
            rule = (
                "name part must be non-empty"
                if not name
                else "name part must be no more than 63 characters"
            )
            causes.append(Cause(field, f"{_value(key)}: {rule}"))
        if name and not re.fullmatch(QUALIFIED_NAME, name):
            causes.append(Cause(field, f"{_value(key)}: {NAME_PART_RULE}"))
        if len(value) > 63:
            causes.append(Cause(field, f"{_value(value)}: must be no more than 63 characters"))
        if not re.fullmatch(LABEL_VALUE, value):
            causes.append(Cause(field, f"{_value(value)}: {VALUE_RULE}"))
    return causes


NAME_RULES: dict[str, Callable[[str, str], list[Cause]]] = {
    "pods": check_subdomain,
    "secrets": check_subdomain,
    "configmaps": check_subdomain,
    "services": check_dns1035,
}


def secret_data(obj: dict[str, Any]) -> dict[str, bytes]:
    """A Secret's data as the server stores it: ``data`` decoded, ``stringData`` merged in."""
    data = {key: base64.b64decode(value) for key, value in (obj.get("data") or {}).items()}
    data.update({key: value.encode() for key, value in (obj.get("stringData") or {}).items()})
    return data


def validate(kind: str, obj: dict[str, Any]) -> list[Cause]:
    """Every rule ``obj`` (about to be created as ``kind``) breaks; [] when it is valid."""
    meta = obj.get("metadata") or {}
    name = meta.get("name") or ""
    causes = NAME_RULES[kind](name, "metadata.name")
    causes += check_labels(meta.get("labels") or {})
    if kind == "secrets":
        data = secret_data(obj)
        for key in data:
            if len(key) > 253 or not re.fullmatch(CONFIG_KEY, key):
                rule = "a valid config key must consist of alphanumeric characters, '-', '_' or '.'"
                causes.append(Cause(f"data[{key}]", f"{_value(key)}: {rule}"))
        if sum(len(value) for value in data.values()) > MAX_SECRET_BYTES:
            causes.append(Cause("data", f"Too long: may not be more than {MAX_SECRET_BYTES} bytes"))
    if kind == "pods":
        spec = obj.get("spec") or {}
        for part in ("hostname", "subdomain"):
            if spec.get(part):
                causes += check_label(spec[part], f"spec.{part}")
    return causes


# -- label selectors -------------------------------------------------------------------------

_REQUIREMENT = re.compile(
    r"\s*(?:(?P<not>!)\s*(?P<absent>[^\s,!=()]+)"
    r"|(?P<key>[^\s,!=()]+)\s*(?:(?P<op>==|!=|=)\s*(?P<value>[^\s,!=()]*)"
    r"|(?P<set>in|notin)\s*\((?P<values>[^()]*)\))?)\s*(?:,|$)"
)


class SelectorError(ValueError):
    """A selector the server cannot parse (it answers 400 BadRequest)."""


Requirement = Callable[[dict[str, str]], bool]


def parse_selector(selector: str) -> list[Requirement]:
    """The requirements of a label selector: ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``,
    ``k notin (a,b)``, ``k`` (exists) and ``!k`` (does not exist), joined by commas. As on the
    real server, ``!=`` and ``notin`` also match objects without the label."""
    requirements: list[Requirement] = []
    position, text = 0, selector.strip()
    while position < len(text):
        match = _REQUIREMENT.match(text, position)
        if not match or match.end() == position:
            raise SelectorError(f"unable to parse requirement: found {text[position:]!r}")
        position = match.end()
        if match["absent"]:
            requirements.append(lambda labels, k=match["absent"]: k not in labels)
            continue
        key, op = match["key"], match["op"] or match["set"]
        for word in check_labels({key: ""}, "key"):
            raise SelectorError(f"unable to parse requirement: {word.message}")
        if op in ("=", "=="):
            requirements.append(lambda labels, k=key, v=match["value"]: labels.get(k) == v)
        elif op == "!=":
            requirements.append(lambda labels, k=key, v=match["value"]: labels.get(k) != v)
        elif op in ("in", "notin"):
            values = frozenset(v.strip() for v in match["values"].split(",") if v.strip())
            if not values:
                raise SelectorError(f"for '{op}' operators, values set can't be empty")
            if op == "in":
                requirements.append(lambda labels, k=key, vs=values: labels.get(k) in vs)
            else:
                requirements.append(lambda labels, k=key, vs=values: labels.get(k) not in vs)
        else:
            requirements.append(lambda labels, k=key: k in labels)
    return requirements


def selects(requirements: list[Requirement], labels: dict[str, str]) -> bool:
    return all(requirement(labels) for requirement in requirements)
