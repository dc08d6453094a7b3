"""Type-strict reading of a dump's fields, for the summarizer's slow paths.

A real dump holds strings, integers and lists of them where these functions look; anything else (a float
size, a nested tuple where a name belongs, a rank of 200,000,000) makes the whole file a ``bad_files`` entry
with the entry and field named (:class:`~frwatch_analyzers.decode.safe_load.DumpError`). None of these functions
hashes, compares, prints or walks deeper than the field's own shape, so a nested or shared-reference
structure costs nothing to refuse. What they return is safe to hash, print and serialise.
"""

from __future__ import annotations

from typing import Any

from ..base.limits import MAX_WORLD_SIZE
from ..base.safe_text import printable
from .safe_load import DumpError, describe

#: Integers kept in int64 arrays and shown in the verdict: sizes, sequence numbers, times.
I64 = 1 << 63


def _bad(where: str, field: str, value: Any, want: str) -> DumpError:
    return DumpError(f"malformed dump: {where}: {field} is {describe(value)}, not {want}")


def text(value: Any, field: str, where: str) -> str:
    """A string field (None reads as ""), made printable."""
    if type(value) is str:
        return printable(value)
    if value is None:
        return ""
    raise _bad(where, field, value, "a string")


def process_group(value: Any, where: str) -> tuple[str, ...] | None:
    """``process_group``: ``(name, description)`` strings (a list in JSON dumps), or None."""
    if value is None:
        return None
    if type(value) in (tuple, list) and 1 <= len(value) <= 2 and all(type(v) is str for v in value):
        return tuple(value)
    raise _bad(where, "process_group", value, "(name, description) strings")


def pg_id(value: Any, where: str) -> int | str | None:
    """``pg_id``: an integer (a string in some JSON dumps), or None."""
    if value is None or type(value) is str:
        return value
    if type(value) is int and -I64 <= value < I64:
        return value
    raise _bad(where, "pg_id", value, "an integer")


def frames(value: Any, where: str) -> list[Any] | tuple[Any, ...] | None:
    """``frames``: a list of frame dicts, or None."""
    if value is None or type(value) in (list, tuple):
        return value  # type: ignore[no-any-return]
    raise _bad(where, "frames", value, "a list of frames")


def sizes(value: Any, field: str, where: str) -> tuple[tuple[int, ...], ...]:
    """``input_sizes`` / ``output_sizes``: a list of shapes, each a list of non-negative integers."""
    if value is None:
        return ()
    if type(value) is not list and type(value) is not tuple:
        raise _bad(where, field, value, "a list of shapes")
    out = []
    for shape in value:
        if type(shape) is not list and type(shape) is not tuple:
            raise _bad(where, f"a shape in {field}", shape, "a list of integers")
        for d in shape:
            if type(d) is not int or not 0 <= d < I64:
                raise _bad(where, f"a dimension in {field}", d, "a non-negative integer")
        out.append(tuple(shape))
    return tuple(out)


def dtypes(value: Any, field: str, where: str) -> tuple[str, ...]:
    """``input_dtypes`` / ``output_dtypes``: a list of dtype names."""
    if value is None:
        return ()
    if type(value) is not list and type(value) is not tuple:
        raise _bad(where, field, value, "a list of dtype names")
    for d in value:
        if type(d) is not str:
            raise _bad(where, f"a dtype in {field}", d, "a string")
    return tuple(value)


def integer(value: Any, field: str, where: str) -> int:
    """An id or sequence number (None reads as -1: unknown)."""
    if value is None:
        return -1
    if type(value) is int and -I64 <= value < I64:
        return value
    raise _bad(where, field, value, "an integer")


def flag(value: Any, field: str, where: str) -> bool:
    """A boolean (None reads as False)."""
    if value is None or type(value) is bool:
        return bool(value)
    raise _bad(where, field, value, "true or false")


def state(value: Any, where: str) -> None:
    """``state`` is a string or None (an unknown string reads as an unknown state)."""
    if value is not None and type(value) is not str:
        raise _bad(where, "state", value, "a string")


def frame(value: Any, where: str) -> tuple[str, str, int]:
    """One frame: ``{"name": str, "filename": str, "line": int}`` -> ``(name, filename, line)``, printable."""
    if type(value) is not dict:
        raise DumpError(f"malformed dump: {where}: a frame is {describe(value)}, not a dict")
    name, filename, line = value.get("name"), value.get("filename"), value.get("line")
    if type(name) is not str:
        raise _bad(where, "a frame's name", name, "a string")
    if type(filename) is not str:
        raise _bad(where, "a frame's filename", filename, "a string")
    if type(line) is not int or not -I64 <= line < I64:
        raise _bad(where, "a frame's line", line, "an integer")
    return printable(name), printable(filename), line


def group_key(value: Any, where: str) -> str:
    """A key of ``pg_config`` or ``pg_status``: a group id, as a string."""
    if type(value) is str:
        return printable(value)
    if type(value) is int and -I64 <= value < I64:
        return str(value)
    raise _bad(where, "a group id", value, "a string or an integer")


def members(value: list[int], where: str) -> list[int]:
    """A group's member ranks, each in ``[0, MAX_WORLD_SIZE)``."""
    if len(value) > MAX_WORLD_SIZE:
        raise DumpError(f"malformed dump: {where}: {len(value)} members, more than {MAX_WORLD_SIZE} ranks")
    for r in value:
        if not 0 <= r < MAX_WORLD_SIZE:
            raise DumpError(
                f"malformed dump: {where}: rank {describe(r)} is outside [0, {MAX_WORLD_SIZE}) "
                "(no job has that many ranks)"
            )
    return value


def count_members(raw: Any, where: str) -> None:
    """Refuse a member list (text or a list) before it is parsed, when it holds too many ranks."""
    count = raw.count(",") + 1 if type(raw) is str else len(raw) if type(raw) in (list, tuple) else 0
    if count > MAX_WORLD_SIZE:
        raise DumpError(f"malformed dump: {where}: more than {MAX_WORLD_SIZE} members")
