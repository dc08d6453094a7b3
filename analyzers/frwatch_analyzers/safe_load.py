"""Decoding one dump file, treating it as untrusted input.

A Flight Recorder pickle holds only dicts, lists, tuples, str, int, float, bool and None (FACTS.md): it needs
no global to load. The unpickler here refuses every global and every persistent id, so a crafted file
cannot run code; it fails with :class:`DumpError` naming the global it refused.
"""

from __future__ import annotations

import io
import json
import pickle
from typing import Any, Protocol

#: Files larger than this are refused unread (a 2000-entry dump with Python frames is ~0.4 MB).
DEFAULT_MAX_BYTES = 256 * 1024 * 1024


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
            f"refused: the pickle asks for the global {module}.{name}; a Flight Recorder dump needs none "
            "(this file is not a dump, or it was crafted)"
        )

    def persistent_load(self, pid: Any) -> Any:
        raise DumpError("refused: the pickle uses persistent ids; a Flight Recorder dump has none")


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
        except DumpError:
            raise
        except EOFError as exc:
            raise DumpError("truncated pickle: the file ends before the dump does") from exc
        except Exception as exc:
            if "truncated" in str(exc):
                raise DumpError("truncated pickle: the file ends before the dump does") from exc
            raise DumpError(f"corrupt pickle: {type(exc).__name__}: {exc}") from exc
        fmt = "pickle"
    elif head in (b"{", b" ", b"\n", b"\t", b"\r"):
        try:
            obj = json.loads(stream.read())
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DumpError(f"corrupt or truncated JSON: {exc}") from exc
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
    if not isinstance(obj["entries"], list):
        raise DumpError("malformed dump: 'entries' is not a list")
    version = str(obj["version"])
    if not version.startswith("2."):
        raise DumpError(f"unsupported Flight Recorder version {version!r} (frwatch reads 2.x)")
    return obj, fmt
