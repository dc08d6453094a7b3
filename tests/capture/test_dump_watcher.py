"""The agent's dump watcher over a real folder: only regular ``<prefix><rank>`` files are dumps; dot-files
(the workload's dump flag, half-written temporaries) never are, even when their content is a whole dump;
links, FIFOs, folders, odd names and impossible ranks are skipped and reported, never read."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from frwatch_analyzers.base.limits import MAX_WORLD_SIZE
from frwatch_dev.dumps import json_bytes, pickle_bytes, world
from frwatch_operator import constants as c
from frwatch_operator.agent.dumpfiles import DumpWatcher, NotADump, open_regular, shown


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


def _settled(watcher: DumpWatcher) -> list[tuple[int, str]]:
    watcher.poll(0.0)
    return [(d.rank, d.path.name) for d in watcher.poll(1.0)]


def test_only_regular_files_named_for_a_rank_are_read_and_the_rest_is_reported(tmp_path: Path) -> None:
    dump = pickle_bytes(world(2).all_reduce(steps=3).dumps()[0])
    p = c.DUMP_FILE_PREFIX
    secret = tmp_path.parent / f"{tmp_path.name}-token"
    secret.write_text("the agent's own token")
    (tmp_path / f"{p}0").write_bytes(dump)
    (tmp_path / f"{p}1").symlink_to(secret)  # a link to a file the agent can read: never followed
    (tmp_path / f"{p}2").symlink_to(tmp_path / f"{p}0")  # even to a real dump
    (tmp_path / f"{p}3").symlink_to(tmp_path / "nowhere")  # dangling
    os.mkfifo(tmp_path / f"{p}4")  # a FIFO named like a dump: opening it must not block
    (tmp_path / f"{p}5").mkdir()
    (tmp_path / f"{p}{'9' * 23}").write_bytes(dump)  # a rank no job has
    (tmp_path / f"{p}007").write_bytes(dump)  # torch writes no leading zero
    (tmp_path / "notes.txt").write_text("")
    (tmp_path / "bad\x1b[31mname\n").write_text("")  # escapes and a newline: shown escaped
    os.mkfifo(tmp_path / f"{p}6.pipe")  # the on-demand pipe: expected, not reported
    watcher = DumpWatcher(tmp_path, p, stable_seconds=0.0, corrupt_after_seconds=30.0)
    assert _settled(watcher) == [(0, f"{p}0")]
    why = {s["name"]: s["why"] for s in watcher.skipped.report()}
    assert why == {
        f"{p}1": "a symbolic link (never followed)",
        f"{p}2": "a symbolic link (never followed)",
        f"{p}3": "a symbolic link (never followed)",
        f"{p}4": "a FIFO",
        f"{p}5": "a folder",
        f"{p}{'9' * 23}": f"rank number {'9' * 23} is beyond the limit of {MAX_WORLD_SIZE} ranks",
        f"{p}007": "rank number 007 has a leading zero (torch writes none)",
        "notes.txt": f"not a dump name (expected {p}<rank>)",
        "bad\\x1b[31mname\\n": f"not a dump name (expected {p}<rank>)",
    }


def test_a_link_swapped_in_after_the_listing_is_not_opened(tmp_path: Path) -> None:
    """The name was a regular file when listed; by the time it is opened it is a link: not followed."""
    secret = tmp_path / ".token"
    secret.write_text("secret")
    path = tmp_path / f"{c.DUMP_FILE_PREFIX}0"
    path.symlink_to(secret)
    with pytest.raises(NotADump, match="symbolic link"):
        open_regular(path)


def test_a_dump_is_complete_only_when_framed_whole(tmp_path: Path) -> None:
    """The agent does not decode (the analyzer does): a pickle must end with STOP, JSON with its closing
    brace; an unframed file is handed out as is, flagged corrupt, once it stayed so corrupt_after_seconds."""
    dump = world(2).all_reduce(steps=3).dumps()[0]
    whole_pickle, whole_json = pickle_bytes(dump), json_bytes(dump)
    (tmp_path / f"{c.DUMP_FILE_PREFIX}0").write_bytes(whole_pickle[:-1])  # no STOP yet
    (tmp_path / f"{c.DUMP_FILE_PREFIX}1").write_bytes(whole_json.rstrip()[:-1])  # no closing brace
    (tmp_path / f"{c.DUMP_FILE_PREFIX}2").write_bytes(whole_json + b"\n")
    watcher = DumpWatcher(tmp_path, c.DUMP_FILE_PREFIX, stable_seconds=0.0, corrupt_after_seconds=5.0)
    watcher.poll(0.0)
    assert [(d.rank, d.fmt, d.corrupt) for d in watcher.poll(1.0)] == [(2, "json", False)]
    late = watcher.poll(6.0)
    assert [(d.rank, d.fmt, d.corrupt) for d in late] == [(0, "pickle", True), (1, "json", True)]
    assert late[0].sha256 == hashlib.sha256(whole_pickle[:-1]).hexdigest()
    assert late[0].size == len(whole_pickle) - 1


def test_file_names_are_shown_escaped() -> None:
    raw = os.fsdecode(b"rank\xff\x00\x07" + "é".encode())
    assert shown(raw) == "rank\\xff\\x00\\x07é"
    assert len(shown("x" * 1000)) == 200
