"""Where in the text an issue's path is: a 1-based line number for the editor, or None."""

from __future__ import annotations

import re

import yaml

from protocol import ProtocolIssue

PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
SYNTAX_LINE = re.compile(r"\bline (\d+)\b")


def path_parts(path: str) -> list[str | int]:
    return [int(i) if i else key for key, i in PART.findall(path)]


def compose(text: str) -> yaml.Node | None:
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    except Exception:  # noqa: BLE001 - a line number is a nicety, never an error
        return None


def child(node: yaml.Node, part: str | int) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == str(part):
                return value
        return None
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int):
        return node.value[part] if 0 <= part < len(node.value) else None
    return None


def line_of(root: yaml.Node | None, path: str) -> int | None:
    """The line of the deepest node of ``path`` found in the document."""
    if root is None:
        return None
    node, line = root, None
    for part in path_parts(path):
        found = child(node, part)
        if found is None:
            break
        node, line = found, found.start_mark.line + 1
    return line


def located(text: str, issues: list[ProtocolIssue]) -> list[dict[str, object]]:
    """Each issue as ``{path, message, line}``."""
    root = compose(text) if any(i.path for i in issues) else None
    out: list[dict[str, object]] = []
    for issue in issues:
        line: int | None = None
        if issue.path:
            line = line_of(root, issue.path)
        else:
            match = SYNTAX_LINE.search(issue.message)
            line = int(match.group(1)) if match else None
        out.append({"path": issue.path, "message": issue.message, "line": line})
    return out
