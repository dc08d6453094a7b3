"""The agent asks each rank's torchcomms recorder for its dump file (``torchcomms_fr_dump_file``, torchcomms
#2720) and its watcher collects what the rank wrote. The rank here is a fake worker server answering as that
handler does (200, then the file appears; 503 before a communicator registered; 404 without torchcomms); the
file's content is fabricated from torchcomms' source (frwatch_dev.dumps.recorders)."""

from __future__ import annotations

from pathlib import Path

from fake_worker import fake_worker, handler_for, http

from frwatch_dev.dumps import pickle_bytes, world
from frwatch_dev.dumps.recorders import as_recorder
from frwatch_operator import constants as c
from frwatch_operator.agent.dumpfiles import DumpWatcher
from frwatch_operator.agent.torchcomms_dump import ask_torchcomms_dump
from frwatch_operator.capture.recorder_env import TC_DUMP_FILE_HANDLER, TC_FILE_PREFIX


def test_torchcomms_ranks_are_asked_to_dump_and_their_files_collected(tmp_path: Path) -> None:
    live, dumps = tmp_path / "live", tmp_path / "dumps"
    live.mkdir(), dumps.mkdir()
    tc = as_recorder(world(2).all_reduce(steps=3).dumps(), "ncclx", "torchcomms")

    def writes_its_file() -> (
        bytes
    ):  # what DebugInfoWriter::write does with <TORCHCOMM_FR_DUMP_TEMP_FILE><rank>
        (dumps / f"{TC_FILE_PREFIX}0").write_bytes(pickle_bytes(tc[0]))
        return http(200, b"Flight Recorder dump initiated for rank 0")

    with (
        fake_worker(live / "rank-0.sock", handler_for({TC_DUMP_FILE_HANDLER: writes_its_file})) as asked0,
        fake_worker(live / "rank-1.sock", handler_for({})) as asked1,  # no torchcomms: 404
        fake_worker(live / "rank-2.sock", handler_for({TC_DUMP_FILE_HANDLER: lambda: http(503, b"not yet")})),
    ):
        sockets = {r: live / f"rank-{r}.sock" for r in range(3)}
        asked, failed = ask_torchcomms_dump(sockets, None)
    assert asked == [0] and asked0 == [TC_DUMP_FILE_HANDLER] and asked1 == [TC_DUMP_FILE_HANDLER]
    assert failed == {"2": f"{TC_DUMP_FILE_HANDLER} answered HTTP 503"}
    watcher = DumpWatcher(dumps, c.DUMP_FILE_PREFIX, stable_seconds=0.0, corrupt_after_seconds=30.0)
    watcher.poll(0.0)
    assert [(d.rank, d.path.name) for d in watcher.poll(1.0)] == [(0, f"{TC_FILE_PREFIX}0")]
