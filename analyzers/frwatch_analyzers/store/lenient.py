"""Lenient fields for records read back from the store (pods/<pod>.json, nodes/<node>.json): a field of the
wrong type reads as absent, and the rest of the record stays (bounds are the records' own validators)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError, WrapValidator


def or_absent(default: Any) -> WrapValidator:
    """A field of the wrong type reads as ``default`` (the record stays)."""

    def wrap(value: Any, handler: Any) -> Any:
        try:
            return handler(value)
        except ValidationError:
            return default

    return WrapValidator(wrap)
