"""A log file's bytes made into lines the scanners can read, within bounds that hold while decoding.

Logs are hostile input like dumps: many MB, binary garbage, terminal colour codes, lines of a megabyte,
bytes that are not UTF-8. What is read is the *tail* (the cause of a failure is at the end of a log): at
most :data:`MAX_LOG_BYTES` of it, cut at a line start. Colour and cursor codes are stripped, undecodable
bytes become U+FFFD, a line longer than :data:`MAX_LINE_CHARS` is cut (with the number of characters left
out), and a tail that is mostly control bytes is refused as binary (:class:`NotText`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The tail of a log read: 2 MiB holds tens of thousands of lines, far more than a traceback needs.
MAX_LOG_BYTES = 2 << 20
#: Characters of a line kept (a 1 MB line of a progress bar or a tensor print is cut here).
MAX_LINE_CHARS = 4096
#: Lines of a tail kept (a tail of empty lines stops here).
MAX_LINES = 100_000
#: Share of a tail's bytes that may be control characters (other than tab, newline, CR, ESC) for it to
#: still be text: a real log has none; compressed or binary data has about 12 %.
_MAX_CONTROL_SHARE = 0.05

#: ANSI escape sequences: CSI (colours, cursor moves), OSC (titles, hyperlinks, ended by BEL or ST), and
#: single-character escapes.
_ANSI = re.compile(r"\x1b(?:\[[0-?]{0,64}[ -/]{0,16}[@-~]|\][^\x07\x1b]{0,4096}(?:\x07|\x1b\\)?|[@-Z\\-_])")
_CONTROL_BYTES = bytes(b for b in range(32) if b not in (9, 10, 13, 27)) + b"\x7f"


class NotText(ValueError):
    """The bytes are not a text log (the message says why)."""


@dataclass(frozen=True)
class LogText:
    """The lines of a log's tail, and what was left out."""

    lines: list[str]
    #: Bytes before the tail that were not read (0: the whole log was read).
    skipped_bytes: int = 0
    #: Lines that were cut at ``MAX_LINE_CHARS``.
    cut_lines: int = 0


def decode_tail(data: bytes, *, size: int | None = None) -> LogText:
    """The lines of ``data``, the last bytes of a log of ``size`` bytes (default: ``data`` is all of it).
    ``data`` longer than :data:`MAX_LOG_BYTES` is cut to its tail. Raises :class:`NotText`."""
    size = len(data) if size is None else size
    if len(data) > MAX_LOG_BYTES:
        data = data[-MAX_LOG_BYTES:]
    skipped = max(0, size - len(data))
    if skipped:  # the first line is partial: start at the next line
        newline = data.find(b"\n")
        data = data[newline + 1 :] if 0 <= newline < len(data) - 1 else data
    if data:
        control = len(data) - len(data.translate(None, _CONTROL_BYTES))
        if control > _MAX_CONTROL_SHARE * len(data):
            raise NotText(f"binary data, not a text log ({control} of {len(data)} bytes are control bytes)")
    text = data.decode("utf-8", errors="replace")
    lines: list[str] = []
    cut = 0
    for raw in text.splitlines()[-MAX_LINES:]:
        beyond = max(0, len(raw) - MAX_LINE_CHARS * 2)  # not even stripped of colour codes
        line = raw[: MAX_LINE_CHARS * 2]
        line = _ANSI.sub("", line) if "\x1b" in line else line
        if len(line) > MAX_LINE_CHARS or beyond:
            cut += 1
            line = f"{line[:MAX_LINE_CHARS]}... ({len(line) - MAX_LINE_CHARS + beyond} more characters)"
        lines.append(line)
    return LogText(lines, skipped, cut)
