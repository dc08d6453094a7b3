"""Hostile logs read within bounds: the tail of many MB, binary refused, colour codes stripped, long lines cut,
bytes that are not UTF-8 replaced."""

from __future__ import annotations

import os

import pytest

from frwatch_analyzers.evidence.logtext import MAX_LINE_CHARS, MAX_LOG_BYTES, NotText, decode_tail


def test_a_log_of_many_megabytes_keeps_its_tail() -> None:
    lines = [f"step {i} loss 0.{i:05d}" for i in range(400_000)]  # about 9 MB
    data = ("\n".join(lines) + "\nValueError: the end\n").encode()
    assert len(data) > 4 * MAX_LOG_BYTES
    text = decode_tail(data)
    assert text.lines[-1] == "ValueError: the end"
    assert text.skipped_bytes == len(data) - MAX_LOG_BYTES
    assert (
        text.lines[0].startswith("step ") and text.lines[0] in lines
    )  # a whole line: the partial one dropped
    assert sum(len(x) + 1 for x in text.lines) <= MAX_LOG_BYTES


def test_binary_garbage_is_refused_with_its_share_of_control_bytes() -> None:
    with pytest.raises(NotText, match=r"binary data, not a text log \(\d+ of 65536 bytes"):
        decode_tail(os.urandom(65536))


def test_colour_codes_are_stripped() -> None:
    data = (
        b"\x1b[31mTraceback (most recent call last):\x1b[0m\n\x1b]0;title\x07\x1b[1;33mValueError\x1b[0m: x\n"
    )
    assert decode_tail(data).lines == ["Traceback (most recent call last):", "ValueError: x"]


def test_a_line_of_a_megabyte_is_cut_and_counted() -> None:
    data = b"x" * (1 << 20) + b"\nlast line\n"
    text = decode_tail(data)
    assert text.cut_lines == 1 and text.lines[-1] == "last line"
    assert text.lines[0].startswith("x" * MAX_LINE_CHARS + "... (")
    assert f"({(1 << 20) - MAX_LINE_CHARS} more characters)" in text.lines[0]


def test_bytes_that_are_not_utf8_are_replaced() -> None:
    assert decode_tail(b"caf\xe9 \xff\xfe ok\n").lines == ["caf\ufffd \ufffd\ufffd ok"]


def test_an_empty_log_has_no_lines() -> None:
    assert decode_tail(b"").lines == []
