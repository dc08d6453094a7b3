"""Label and field selectors, parsed and matched as the Kubernetes API server does.

Label selectors: ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k``, ``!k``,
comma-separated (all must hold). Field selectors: ``path=v``, ``path==v``, ``path!=v`` over a
per-resource set of supported field paths; an unsupported path is a 400 like the real server's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from frwatch_dev.localcluster.errors import ApiError

Obj = Mapping[str, Any]

_LABEL_TOKEN = re.compile(r"\s*(!=|==|=|\(|\)|,|!|[^\s!=(),]+)")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!exists"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        # "!=" and "notin" match objects without the label too, as in Kubernetes.
        return not present or value not in self.values


def _tokens(text: str) -> list[str]:
    tokens: list[str] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = _LABEL_TOKEN.match(text, pos)
        if match is None:
            raise ApiError.bad_request(f"unable to parse requirement: {text[pos:]!r}")
        tokens.append(match.group(1))
        pos = match.end()
    return tokens


def parse_label_selector(text: str | None) -> tuple[Requirement, ...]:
    """Parse a label selector string; raise a 400 ``ApiError`` naming the bad part."""
    if not text or not text.strip():
        return ()
    tokens = _tokens(text)
    requirements: list[Requirement] = []
    i = 0

    def take() -> str:
        nonlocal i
        if i >= len(tokens):
            raise ApiError.bad_request(f"unable to parse requirement: unexpected end of {text!r}")
        token = tokens[i]
        i += 1
        return token

    while i < len(tokens):
        word = take()
        if word == "!":
            requirements.append(Requirement(take(), "!exists"))
        else:
            key = word
            if i >= len(tokens) or tokens[i] == ",":
                requirements.append(Requirement(key, "exists"))
            else:
                op = take()
                if op in ("=", "==", "!="):
                    value = tokens[i] if i < len(tokens) and tokens[i] != "," else ""
                    if value:
                        i += 1
                    requirements.append(Requirement(key, "!=" if op == "!=" else "=", (value,)))
                elif op in ("in", "notin"):
                    if take() != "(":
                        raise ApiError.bad_request(f"unable to parse requirement: expected '(' in {text!r}")
                    values: list[str] = []
                    while True:
                        part = take()
                        if part == ")":
                            break
                        if part != ",":
                            values.append(part)
                    requirements.append(Requirement(key, op, tuple(values)))
                else:
                    raise ApiError.bad_request(f"unable to parse requirement: unknown operator {op!r}")
        if i < len(tokens):
            if tokens[i] != ",":
                raise ApiError.bad_request(f"unable to parse requirement: expected ',' in {text!r}")
            i += 1
    return tuple(requirements)


def labels_match(requirements: tuple[Requirement, ...], obj: Obj) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(req.matches(labels) for req in requirements)


@dataclass(frozen=True)
class FieldRequirement:
    path: str
    negate: bool
    value: str

    def matches(self, obj: Obj) -> bool:
        return (field_value(obj, self.path) == self.value) != self.negate


def field_value(obj: Obj, path: str) -> str:
    """The string form of a dotted field as the API server compares it ('' when absent)."""
    node: Any = obj
    for part in path.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    if node is None:
        return ""
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)


def parse_field_selector(text: str | None, supported: Callable[[str], bool]) -> tuple[FieldRequirement, ...]:
    if not text or not text.strip():
        return ()
    reqs: list[FieldRequirement] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        match = re.fullmatch(r"([^!=]+?)\s*(!=|==|=)\s*(.*)", part)
        if match is None:
            raise ApiError.bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        path, op, value = match.groups()
        if not supported(path):
            raise ApiError.bad_request(f"field label not supported: {path}")
        reqs.append(FieldRequirement(path, op == "!=", value))
    return tuple(reqs)


def fields_match(requirements: tuple[FieldRequirement, ...], obj: Obj) -> bool:
    return all(req.matches(obj) for req in requirements)
