"""Decoding one dump file, treating it as untrusted input.

A Flight Recorder pickle holds only dicts, lists, tuples, str, int, float, bool and None (FACTS.md): it needs
no global to load. The unpickler here refuses every global, extension code and persistent id, so a crafted
file cannot run code; it fails with :class:`DumpError` naming what it refused. With no callable reachable,
REDUCE, BUILD, INST, OBJ and NEWOBJ have nothing to call and fail as a corrupt pickle.

What this module does not bound is the memory and time of decoding (a memo index can ask for gigabytes, a
key made of shared references can take forever to hash): callers decode in a worker process under the
limits of :mod:`frwatch_analyzers.base.limits` (see :mod:`frwatch_analyzers.decode.isolation`).
"""

from __future__ import annotations

import io
import json
import pickle
from typing import Any, Protocol

from pydantic_core import from_json

from ..base.limits import DEFAULT_MAX_FILE_BYTES
from ..base.safe_text import printable

#: Files larger than this are refused unread (see :mod:`frwatch_analyzers.base.limits`).
DEFAULT_MAX_BYTES = DEFAULT_MAX_FILE_BYTES


class _Peekable(Protocol):
    """A buffered binary stream (an open file, a BufferedReader)."""

    def peek(self, size: int = ..., /) -> bytes: ...
    def read(self, size: int = ..., /) -> bytes: ...
    def readline(self, size: int = ..., /) -> bytes: ...


class DumpError(Exception):
    """A file that is not a usable Flight Recorder dump; the message says why."""


class _RefusingUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise DumpError(
            f"refused: the pickle asks for the global {printable(str(module), 80)}.{printable(str(name), 80)}; "
            "a Flight Recorder dump needs none (this file is not a dump, or it was crafted)"
        )

    def persistent_load(self, pid: Any) -> Any:
        raise DumpError("refused: the pickle uses persistent ids; a Flight Recorder dump has none")


# Extension codes (EXT1/2/4) resolve through copyreg's registry to (module, name) and then find_class,
# which refuses them; an unregistered code fails as a corrupt pickle.


def decode(data: bytes) -> tuple[dict[str, Any], str]:
    """Decode a dump (pickle or JSON) held in memory. Returns ``(dump, "pickle"|"json")``."""
    # a BufferedReader: the C unpickler reads a BytesIO 2.5x slower than a buffered stream
    return decode_stream(io.BufferedReader(io.BytesIO(data), buffer_size=1 << 20))


def decode_stream(stream: _Peekable) -> tuple[dict[str, Any], str]:
    """Decode a dump (pickle or JSON) from a buffered binary stream. Raises :class:`DumpError`."""
    head = stream.peek(1)[:1]
    if not head:
        raise DumpError("empty file")
    if head == b"\x80":
        try:
            obj = _RefusingUnpickler(stream).load()
        except (DumpError, MemoryError):
            raise
        except EOFError as exc:
            raise DumpError("truncated pickle: the file ends before the dump does") from exc
        except Exception as exc:
            if "truncated" in str(exc):
                raise DumpError("truncated pickle: the file ends before the dump does") from exc
            raise DumpError(f"corrupt pickle: {type(exc).__name__}: {printable(str(exc), 200)}") from exc
        fmt = "pickle"
    elif head in (b"{", b" ", b"\n", b"\t", b"\r"):
        obj = _json(stream.read())
        fmt = "json"
    else:
        raise DumpError(
            f"not a Flight Recorder dump (starts with {stream.peek(8)[:8]!r}; expected a pickle or JSON)"
        )
    if not isinstance(obj, dict):
        raise DumpError(f"not a Flight Recorder dump: the top level is a {type(obj).__name__}, not a dict")
    if "entries" not in obj or "version" not in obj:
        missing = [k for k in ("version", "entries") if k not in obj]
        raise DumpError(f"not a Flight Recorder dump: no {' or '.join(missing)} key")
    if type(obj["entries"]) is not list:
        raise DumpError("malformed dump: 'entries' is not a list")
    version = obj["version"]
    if type(version) is not str:
        raise DumpError(f"malformed dump: 'version' is {describe(version)}, not a string")
    if not version.startswith("2."):
        raise DumpError(f"unsupported Flight Recorder version {printable(version, 40)!r} (frwatch reads 2.x)")
    if fmt == "json":
        _groups_as_pickled(obj["entries"])
    return obj, fmt


def _json(data: bytes) -> Any:
    """JSON decoded by pydantic-core's parser (jiter): about 1.6x as fast as ``json.loads`` on a 2000-entry
    live answer, and it gives equal short strings as one object (``cache_strings``), as torch's pickle does,
    so the summarizer's compiled loop keys its caches on them. What it refuses (it nests 200 levels at most,
    where a dump needs 6; it takes no lone surrogate such as ``"\\ud800"``, which Python's parser keeps and
    the analyzer prints escaped) gets Python's parser, whose answer or error stands."""
    try:
        return from_json(data, cache_strings="all")
    except ValueError:
        pass
    try:
        return json.loads(data)
    except RecursionError as exc:
        raise DumpError("malformed dump: the JSON nests too deeply") from exc
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError, or an integer of 4300+ digits
        raise DumpError(f"corrupt or truncated JSON: {printable(str(exc), 200)}") from exc


def _groups_as_pickled(entries: list[Any]) -> None:
    """An entry's ``process_group`` as the pickle holds it: a ``(name, description)`` tuple, one object for
    the entries of one group (JSON has a fresh list each). Anything else is left for the summarizer to name."""
    shared: dict[tuple[str, str], tuple[str, str]] = {}
    for e in entries:
        if type(e) is dict:
            pg = e.get("process_group")
            if type(pg) is list and len(pg) == 2 and type(pg[0]) is str and type(pg[1]) is str:
                key = (pg[0], pg[1])
                e["process_group"] = shared.setdefault(key, key)


def describe(value: Any) -> str:
    """What an untrusted value is, in a few words, without walking it (no repr, no hash, no str of a
    container: a nested or shared-reference structure costs nothing to describe)."""
    kind = type(value)
    if value is None or kind is bool:
        return repr(value)
    if kind is int:
        return repr(value) if value.bit_length() < 64 else f"an integer of {value.bit_length()} bits"
    if kind is float:
        return repr(value)
    if kind is str:
        return repr(printable(value, 40))
    if kind in (list, tuple, dict):
        return f"a {kind.__name__} of {len(value)}"
    return f"a {kind.__name__}"
