"""The workloads' lines reach a stdout shared by several ranks whole (``frwatch_dev.workloads.say``)."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import TextIO

from frwatch_dev.workloads.say import say


class _Writes(io.RawIOBase):
    """A raw stream that keeps each write it gets, as the file behind an unbuffered stdout does."""

    def __init__(self) -> None:
        self.calls: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self.calls.append(bytes(data))
        return len(data)


def test_print_to_an_unbuffered_stream_is_two_writes_and_say_is_one() -> None:
    raw = _Writes()
    # what PYTHONUNBUFFERED=1 gives: no buffer between the text layer and the file
    out: TextIO = io.TextIOWrapper(raw, encoding="utf-8", write_through=True)  # type: ignore[type-var]
    print("faulty_training rank=1", file=out, flush=True)
    assert raw.calls == [b"faulty_training rank=1", b"\n"]  # another rank's line can land between them
    raw.calls.clear()
    say("faulty_training rank=1", out)
    assert raw.calls == [b"faulty_training rank=1\n"]


_WRITER = """
import sys
from frwatch_dev.workloads.say import say
for i in range(int(sys.argv[2])):
    say(f"writer={sys.argv[1]} line={i} " + "x" * 200)
"""


def test_two_processes_sharing_an_append_only_stdout_keep_every_line_whole(tmp_path: Path) -> None:
    """As torchrun's ranks share their pod's log: both inherit one file opened for appending, unbuffered."""
    log = tmp_path / "0.log"
    lines = 3000
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with open(log, "ab") as out:
        writers = [
            subprocess.Popen([sys.executable, "-c", _WRITER, str(w), str(lines)], stdout=out, env=env)
            for w in (0, 1)
        ]
        assert [w.wait(timeout=120) for w in writers] == [0, 0]
    text = log.read_text()
    whole = re.compile(r"writer=([01]) line=(\d+) x{200}")
    seen: dict[str, list[int]] = {"0": [], "1": []}
    for line in text.splitlines():
        match = whole.fullmatch(line)
        assert match is not None, line[:120]
        seen[match[1]].append(int(match[2]))
    assert seen == {"0": list(range(lines)), "1": list(range(lines))}
