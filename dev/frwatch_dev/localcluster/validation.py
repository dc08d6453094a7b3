"""Object-metadata validation as the API server does it: names, labels, annotations."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")

Causes = list[tuple[str, str]]


def _check_name(name: str, plural: str) -> str | None:
    if plural == "namespaces":
        if len(name) > 63 or not _DNS_LABEL.fullmatch(name):
            return "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-'"
        return None
    if plural == "services":
        if len(name) > 63 or not _DNS_1035.fullmatch(name):
            return "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with a letter"
        return None
    if len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name):
        return (
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
            "'-' or '.', and must start and end with an alphanumeric character"
        )
    return None


def _check_key(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if "/" in key and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return "prefix part must be a lowercase RFC 1123 subdomain"
    if not name or len(name) > 63 or not _QUALIFIED_NAME.fullmatch(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character (max 63)"
        )
    return None


def validate_metadata(meta: Mapping[str, Any], plural: str) -> Causes:
    """Problems with an object's metadata as (field, message) pairs; empty when valid."""
    causes: Causes = []
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        causes.append(("metadata.name", "Required value: name or generateName is required"))
    elif (problem := _check_name(name, plural)) is not None:
        causes.append(("metadata.name", f"Invalid value: {name!r}: {problem}"))
    labels = meta.get("labels") or {}
    if not isinstance(labels, Mapping):
        causes.append(("metadata.labels", "Invalid value: must be a map of strings"))
        labels = {}
    for key, value in labels.items():
        if (problem := _check_key(key)) is not None:
            causes.append(("metadata.labels", f"Invalid value: {key!r}: {problem}"))
        if not isinstance(value, str):
            causes.append((f"metadata.labels.{key}", f"Invalid value: {value!r}: must be a string"))
        elif len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
            causes.append(
                (
                    "metadata.labels",
                    f"Invalid value: {value!r}: a valid label must be an empty string "
                    "or consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
                    "an alphanumeric character (max 63)",
                )
            )
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, Mapping):
        causes.append(("metadata.annotations", "Invalid value: must be a map of strings"))
        annotations = {}
    total = 0
    for key, value in annotations.items():
        if (problem := _check_key(key)) is not None:
            causes.append(("metadata.annotations", f"Invalid value: {key!r}: {problem}"))
        if not isinstance(value, str):
            causes.append((f"metadata.annotations.{key}", f"Invalid value: {value!r}: must be a string"))
        else:
            total += len(key) + len(value)
    if total > 256 * 1024:
        causes.append(("metadata.annotations", "Too long: must have at most 262144 bytes"))
    return causes
