"""The agent's dump watcher over a real folder: only ``<prefix><rank>`` files are dumps; dot-files (the
workload's dump flag, half-written temporaries) never are, even when their content is a whole dump."""

from __future__ import annotations

import os
from pathlib import Path

from frwatch_analyzers.testing import pickle_bytes, world
from frwatch_operator import constants as c
from frwatch_operator.agent.uploader import DumpWatcher


def test_dot_files_are_never_taken_for_dumps(tmp_path: Path) -> None:
    dump = pickle_bytes(world(2).all_reduce(steps=3).dumps()[0])
    (tmp_path / c.WORKLOAD_DUMP_FLAG_FILE).write_text("")
    (tmp_path / f".{c.DUMP_FILE_PREFIX}0.4242.tmp").write_bytes(dump)  # complete, not yet renamed
    (tmp_path / f".{c.DUMP_FILE_PREFIX}1").write_bytes(dump)  # a dot-file named like a dump
    (tmp_path / f"{c.DUMP_FILE_PREFIX}0").write_bytes(dump)
    for prefix in (c.DUMP_FILE_PREFIX, f".{c.DUMP_FILE_PREFIX}"):  # even a prefix starting with a dot
        watcher = DumpWatcher(tmp_path, prefix, stable_seconds=0.0, corrupt_after_seconds=30.0)
        watcher.poll(0.0)  # first sight: size and mtime noted
        found = watcher.poll(1.0)
        assert [(d.rank, d.path.name) for d in found] == (
            [(0, f"{c.DUMP_FILE_PREFIX}0")] if prefix == c.DUMP_FILE_PREFIX else []
        )


def test_unsettled_names_each_dump_file_not_handed_out_yet(tmp_path: Path) -> None:
    """What the agent waits for before exiting: a new or changed file, a half-written one, not an old empty one."""
    dump = pickle_bytes(world(2).all_reduce(steps=3).dumps()[0])
    watcher = DumpWatcher(tmp_path, c.DUMP_FILE_PREFIX, stable_seconds=0.5, corrupt_after_seconds=5.0)
    whole, half, empty = (tmp_path / f"{c.DUMP_FILE_PREFIX}{r}" for r in (0, 1, 2))
    whole.write_bytes(dump)
    half.write_bytes(dump[: len(dump) // 2])
    empty.write_bytes(b"")
    (tmp_path / c.WORKLOAD_DUMP_FLAG_FILE).write_text("")
    assert watcher.unsettled(0.0) == [whole, half, empty]  # never seen
    watcher.poll(0.0)
    assert watcher.unsettled(0.1) == [whole, half, empty]  # seen, not stable yet
    assert [d.rank for d in watcher.poll(1.0)] == [0]
    assert watcher.unsettled(1.0) == [half, empty]  # the half dump does not parse; the empty one is young
    assert watcher.unsettled(6.0) == [half]  # empty since 5 s: nothing to wait for
    os.utime(whole, ns=(1, 1))  # touched again: it counts only once seen and taken anew
    assert whole in watcher.unsettled(6.0)
